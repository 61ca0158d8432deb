import Foundation
import Storage

/// Where a CSV export continues: after this start time and UUID.
public struct CSVCursor: Sendable, Hashable {
    let start: Int64
    let uuid: [UInt8]
}

extension HealthStore {
    /// The CSV header line.
    public static let csvHeader = "uuid,type,start,end,value,unit,source,time_zone\r\n"
    /// Rows an export page holds (`csvPage`).
    public static let csvPageSize = 5000

    /// Writes one type's samples as CSV (RFC 4180), oldest first, in pages of 5,000 so a large history never
    /// sits in memory: `uuid,type,start,end,value,unit,source,time_zone`. Times are ISO 8601 with the offset of
    /// the zone the sample was recorded in (UTC when unknown); values are in `unit` (default: canonical).
    public func exportCSV(
        type: HealthType, user: Int64, unit: HealthUnit? = nil, from: EpochMilliseconds? = nil,
        to: EpochMilliseconds? = nil, write: (String) throws -> Void
    ) throws {
        try write(Self.csvHeader)
        var cursor: CSVCursor?
        repeat {
            let page = try csvPage(type: type, user: user, unit: unit, from: from, to: to, after: cursor)
            if !page.text.isEmpty { try write(page.text) }
            cursor = page.next
        } while cursor != nil
    }

    /// One page of `exportCSV` (without the header): the rows after `cursor`, and where the next page starts
    /// (nil after the last). For callers that send pages asynchronously (a server stream).
    public func csvPage(
        type: HealthType, user: Int64, unit: HealthUnit? = nil, from: EpochMilliseconds? = nil,
        to: EpochMilliseconds? = nil, after cursor: CSVCursor?, pageSize: Int = csvPageSize
    ) throws -> (text: String, rows: Int, next: CSVCursor?) {
        let unit = unit ?? type.canonicalUnit
        if type.kind != .category { _ = try type.canonicalUnit.convert(0, to: unit) }
        var arguments: [(any SQLConvertible)?] = [user, type.code, from ?? Int64.min, to ?? Int64.max]
        var sql =
            "SELECT \(Self.sampleColumns) FROM samples WHERE user_id = ? AND type = ? AND start_ms >= ? AND start_ms < ?"
        if let cursor {
            sql += " AND (start_ms > ? OR (start_ms = ? AND uuid > ?))"
            arguments += [cursor.start, cursor.start, cursor.uuid]
        }
        sql += " ORDER BY start_ms, uuid LIMIT ?"
        arguments.append(pageSize)
        let rows = try database.read { db in try db.prepare(sql).query(arguments) }
        var page = ""
        var zones: [String: TimeZone] = [:]
        var last: CSVCursor?
        for row in rows {
            let sample = try Self.decodeSample(row)
            var offset = 0
            if let name = sample.timeZone {
                if zones[name] == nil { zones[name] = TimeZoneName.timeZone(name) }
                offset = zones[name]?.secondsFromGMT(for: HealthCalendar.date(sample.start)) ?? 0
            }
            let value: String
            if let stage = sample.sleepValue {
                value = stage.name
            } else {
                value = String(try sample.value(in: unit))
            }
            let fields = [
                sample.uuid.uuidString.lowercased(), type.rawValue, Timestamps.format(sample.start, offset: offset),
                Timestamps.format(sample.end, offset: offset), value, type.kind == .category ? "" : unit.symbol,
                sample.source, sample.timeZone ?? "",
            ]
            page += fields.map(Self.csvField).joined(separator: ",") + "\r\n"
            last = CSVCursor(start: sample.start, uuid: sample.uuid.bytes)
        }
        return (page, rows.count, rows.count == pageSize ? last : nil)
    }

    static func csvField(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

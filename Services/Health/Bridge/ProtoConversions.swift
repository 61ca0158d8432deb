import Foundation
import HealthAPI
import HealthCore
import RPC
import Schema

// Domain values as the health service's protobuf messages, and requests back into domain values: what the handlers
// (HealthService) and the gateway's sync (RPCHealthRemote) share, so the gateway links no server code.

/// Conversions between the health service's messages and domain values, shared by the handlers and the gateway.
public enum HealthProto {
    public static func uuid(_ text: String, _ what: String) throws(HealthError) -> UUID {
        guard let uuid = UUID(uuidString: text) else {
            throw HealthError(.invalidArgument, "\(what): \"\(text)\" is not a UUID")
        }
        return uuid
    }

    public static func unit(_ symbol: String) throws(HealthError) -> HealthUnit? {
        symbol.isEmpty ? nil : try HealthUnit.parse(symbol)
    }

    /// A sample of a request: its value converted to the canonical unit.
    public static func sample(_ message: HealthV1.Sample, index: Int) throws(HealthError) -> HealthSample {
        do {
            let type = try HealthType.parse(message.type)
            let unit = try unit(message.unit) ?? type.canonicalUnit
            return try HealthSample(
                uuid: uuid(message.uuid, "uuid"), type: type, value: message.value, unit: unit, start: message.startMs,
                end: message.endMs, source: message.source, timeZone: message.timeZone,
                metadata: message.metadata.map { MetadataEntry($0.key, $0.value) })
        } catch {
            throw HealthError(error.category, "batch rejected, #\(index) (\(message.uuid)): \(error.message)")
        }
    }

    /// A stored sample as a message, its value in `unit` (canonical when nil; categories stay raw values).
    public static func message(_ sample: HealthSample, unit: HealthUnit? = nil) throws(HealthError) -> HealthV1.Sample {
        let target = sample.type.kind == .category ? sample.type.canonicalUnit : (unit ?? sample.type.canonicalUnit)
        return HealthV1.Sample(
            uuid: sample.uuid.uuidString.lowercased(), type: sample.type.rawValue, value: try sample.value(in: target),
            unit: target.symbol, startMs: sample.start, endMs: sample.end, source: sample.source,
            timeZone: sample.timeZone,
            metadata: sample.metadata.map { HealthV1.MetadataEntry(key: $0.key, value: $0.value) })
    }

    public static func deletion(_ message: HealthV1.Deletion) throws(HealthError) -> Deletion {
        Deletion(
            uuid: try uuid(message.uuid, "deletion"),
            type: try message.type.map { name throws(HealthError) in try HealthType.parse(name) },
            start: message.startMs, end: message.endMs)
    }

    public static func message(_ deletion: Deletion) -> HealthV1.Deletion {
        HealthV1.Deletion(
            uuid: deletion.uuid.uuidString.lowercased(), type: deletion.type?.rawValue, startMs: deletion.start,
            endMs: deletion.end)
    }

    public static func summary(_ result: WriteResult) throws(HealthError) -> HealthV1.WriteSummary {
        HealthV1.WriteSummary(
            added: Int64(result.added), duplicates: Int64(result.duplicates),
            alreadyDeleted: Int64(result.alreadyDeleted),
            deleted: Int64(result.deleted), duplicateDeletions: Int64(result.duplicateDeletions),
            conflicts: try result.conflicts.map { conflict throws(HealthError) in
                HealthV1.Conflict(stored: try message(conflict.stored), rejected: try message(conflict.rejected))
            },
            anchor: result.anchor, conflictsOmitted: Int64(result.conflictsOmitted))
    }

    public static func types(_ names: [String]) throws(HealthError) -> [HealthType] {
        var types: [HealthType] = []
        for name in names { types.append(try HealthType.parse(name)) }
        return types
    }

    public static func filter(types names: [String], from: Int64?, to: Int64?) throws(HealthError) -> SyncFilter {
        let types = try types(names)
        return SyncFilter(types: types.isEmpty ? nil : Set(types), from: from, to: to)
    }

    public static func interval(_ interval: HealthV1.StatisticsInterval) -> StatisticsInterval? {
        switch interval {
        case .hour: .hour
        case .day: .day
        case .week: .week
        case .month: .month
        default: nil
        }
    }

    public static func preset(_ preset: HealthV1.StatisticsPreset) -> StatisticsPreset? {
        switch preset {
        case .today: .today
        case .last7Days: .last7Days
        case .last30Days: .last30Days
        case .thisMonth: .thisMonth
        default: nil
        }
    }
}

import Base
import Foundation
import HealthAPI
import HealthBridge
import HealthCore
import HealthService
import RPC
import Schema
import Transport

/// The health issue's figures: a device's first sync of 4,300 samples and an incremental sync of one more
/// after `samples` are synced (both through the service over loopback TCP), importing an export of
/// `samples` records, and daily statistics over a year of minute-level steps. Wall and CPU time each, with
/// the issue's goal beside it and whether this run met it (the sync and import goals are for 1,000,000).
struct HealthBenchmark {
    /// Export records imported, then synced before the one-sample incremental sync (the issue: 1,000,000).
    let samples: Int

    func run() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("health-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        func path(_ name: String) -> String { scratch.appendingPathComponent(name).path }
        print(
            "Health benchmark: \(samples) export records, \(ProcessInfo.processInfo.activeProcessorCount) cores, files in \(scratch.path)"
        )
        var rows: [[String]] = []
        /// `limit`: the goal as wall seconds (met when under it); otherwise `body` says whether its goal held.
        func measure(
            _ name: String, goal: String, limit: Double? = nil, _ body: () async throws -> (note: String, held: Bool?)
        ) async rethrows {
            let wall = ContinuousClock.now, cpu = processCPUSeconds()
            let (note, held) = try await body()
            let elapsed = ContinuousClock.now - wall
            let seconds = elapsed.seconds
            let verdict = (limit.map { seconds < $0 } ?? held).map { $0 ? "met" : "MISSED" } ?? ""
            rows.append([name, Self.format(seconds), Self.format(processCPUSeconds() - cpu), goal, verdict, note])
        }

        // Daily statistics over a year of minute-level steps.
        let year = try HealthStore(path: path("year.sqlite"))
        let walker = try year.createUser(name: "walker").user.id
        let yearStart = Timestamps.parse("2025-01-01T00:00:00+01:00")!.0
        var batch: [HealthSample] = []
        for minute in 0..<525_600 {
            let at = yearStart + Int64(minute) * 60_000
            batch.append(
                HealthSample(
                    type: .stepCount, value: Double(minute % 7), start: at, end: at + 60_000, source: "Apple Watch"))
            if batch.count == 10_000 || minute == 525_599 {
                _ = try year.add(batch, user: walker)
                batch.removeAll(keepingCapacity: true)
            }
        }
        let request = StatisticsRequest(
            type: .stepCount, from: yearStart, to: Timestamps.parse("2026-01-01T00:00:00+01:00")!.0, interval: .day,
            timeZone: TimeZone(identifier: "Europe/Prague")!)
        for round in 1...3 {
            try await measure("daily stats, a year of minute steps (\(round))", goal: "< 0.1 s", limit: 0.1) {
                ("\(try year.statistics(request, user: walker).buckets.count) days", nil)
            }
        }

        // The service over loopback TCP.
        let store = try HealthStore(path: path("server.sqlite"))
        let server = try TCPServer(
            rpc: RPCServer(name: "health-bench", services: [HealthService(store: store)]), port: 0)
        let rpcClient = RPCClient(transports: [try TCPClientTransport(endpoint: server.address)])
        defer { rpcClient.close() }
        let client = HealthV1.Health.Client(wrapping: rpcClient)

        // First sync of 4,300 samples (the old app's copy took 11–14.6 s).
        let small = try DeviceStore(path: path("small.sqlite"))
        _ = try small.add(
            (0..<4300).map {
                HealthSample(
                    type: $0 % 2 == 0 ? .dietaryWater : .stepCount, value: 100, start: yearStart + Int64($0) * 600_000,
                    end: yearStart + Int64($0) * 600_000 + 60_000, source: "iPhone")
            })
        let smallToken = try await client.createUser(.init(name: "small")).token
        try await measure("first sync, 4,300 samples", goal: "< 0.2 s", limit: 0.2) {
            let report = try await HealthSync(device: small, remote: RPCHealthRemote(client: client, token: smallToken))
                .run()
            return ("pushed \(report.pushedChanges)", nil)
        }

        // Import of an export of `samples` records.
        let export = path("export.xml")
        try Self.writeExport(records: samples, to: export)
        let device = try DeviceStore(path: path("device.sqlite"))
        try await measure("import, \(samples) records", goal: "< 30 s", limit: 30) {
            let report = try HealthExportImporter(store: device.store, user: device.user).importFile(atPath: export)
            return ("added \(report.added)", nil)
        }
        try await measure("import again", goal: "adds nothing") {
            let added = try HealthExportImporter(store: device.store, user: device.user).importFile(atPath: export)
                .added
            return ("added \(added)", added == 0)
        }

        // Sync them all, then one more sample.
        let token = try await client.createUser(.init(name: "importer")).token
        let sync = HealthSync(device: device, remote: RPCHealthRemote(client: client, token: token), batchSize: 5000)
        try await measure("first sync, \(samples) samples", goal: "") {
            ("pushed \(try await sync.run().pushedChanges)", nil)
        }
        _ = try device.add([
            HealthSample(type: .dietaryWater, value: 250, start: yearStart, end: yearStart, source: "iPhone")
        ])
        try await measure("incremental sync of 1 after \(samples)", goal: "< 0.05 s", limit: 0.05) {
            let report = try await sync.run()
            return ("pushed \(report.pushedChanges), pulled \(report.pulledChanges)", nil)
        }
        try await measure("sync again", goal: "changes nothing") {
            let report = try await sync.run()
            return (
                "pushed \(report.pushedChanges), pulled \(report.pulledChanges)",
                report.pushedChanges == 0 && report.pulledChanges == 0
            )
        }
        printTable(["health", "wall s", "CPU s", "goal", "verdict", ""], rows)
        await server.shutdown(grace: .seconds(1))
    }

    static func format(_ seconds: Double) -> String { String(format: seconds < 1 ? "%.4f" : "%.2f", seconds) }

    /// An export like the real ones: a DTD, one step record a minute with the watch's device and its zone.
    static func writeExport(records: Int, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else { throw CocoaError(.fileWriteUnknown) }
        defer { try? handle.close() }
        handle.write(
            Data(
                """
                <?xml version="1.0" encoding="UTF-8"?>
                <!DOCTYPE HealthData [
                <!-- HealthKit Export Version: 14 -->
                <!ATTLIST HealthData locale CDATA #REQUIRED>
                ]>
                <HealthData locale="en_US">
                 <ExportDate value="2026-05-02 10:00:00 +0200"/>

                """.utf8))
        let device =
            "&lt;&lt;HKDevice: 0x283e3c0a0&gt;, name:Apple Watch, manufacturer:Apple Inc., model:Watch, hardware:Watch6,2, software:10.4&gt;"
        var chunk = ""
        for index in 0..<records {
            // Minutes from 2024-01-01 00:00 in +0100, written as the export writes them.
            let (day, minute) = (index / 1440, index % 1440)
            let (year, month, dayOfMonth) = civil(19_723 + day)
            let stamp = String(format: "%04d-%02d-%02d %02d:%02d", year, month, dayOfMonth, minute / 60, minute % 60)
            chunk +=
                #" <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Jana’s Apple Watch" sourceVersion="10.4" device="\#(device)" unit="count" creationDate="\#(stamp):30 +0100" startDate="\#(stamp):00 +0100" endDate="\#(stamp):59 +0100" value="\#(index % 90 + 1)">"#
            chunk += "\n  <MetadataEntry key=\"HKTimeZone\" value=\"Europe/Prague\"/>\n </Record>\n"
            if index % 10_000 == 9_999 {
                handle.write(Data(chunk.utf8))
                chunk = ""
            }
        }
        handle.write(Data((chunk + "</HealthData>\n").utf8))
    }

    /// The date of `days` since 1970-01-01.
    static func civil(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719_468, era = z / 146_097, doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, doy - (153 * mp + 2) / 5 + 1)
    }
}

import Dqlite
import Foundation
import Storage
import TestSupport
import Testing

@testable import ZooCore

/// What a replicated database costs the zoo, in the same run: loading the sample data and then reads (searches and
/// details) through a library on the SQLite file and on a three-node dqlite cluster in this process. Reads come from
/// the library's snapshot in memory either way, the database asked only whether it changed (every 50 ms), so they
/// should cost the same; the load is writes, a round trip to the leader each. Prints the figures; asserts only that
/// both answer alike.
@Suite(.serialized) struct ZooBackendCostTests {
    static let reads = 20_000

    static func measure(_ library: ZooLibrary) throws -> (load: Double, reads: Double, found: [Int]) {
        let loading = ContinuousClock.now
        _ = try library.loadSampleDataIfEmpty(from: ZooDataSet.bundledSampleDirectory)
        let load = (ContinuousClock.now - loading) / .seconds(1)
        let texts = ["zelva", "lev", "gorila", "", "panda", "tučňák"]
        var found: [Int] = []
        let reading = ContinuousClock.now
        for index in 0..<reads {
            let catalogue = try library.snapshot().catalogue
            if index % 2 == 0 {
                let page = try catalogue.search(SearchQuery(text: texts[index % texts.count]))
                if index < 12 { found.append(page.total) }
            } else {
                _ = try? catalogue.animal(id: 1 + index % 40)
            }
        }
        return (load, (ContinuousClock.now - reading) / .seconds(1), found)
    }

    @Test func sampleLoadAndReadsOnOneSQLiteFileAndOnThreeDqliteNodes() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ZooBackendCost-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let onFile = try Self.measure(try ZooLibrary(path: directory.appendingPathComponent("zoo.sqlite").path))

        let base = try RawSocket.freePortBlock(count: 3)
        let addresses = (0..<3).map { "127.0.0.1:\(base + $0)" }
        let replicas = try addresses.map { address in
            try DqliteReplica(
                addresses: addresses, ownAddress: address,
                dataDirectory: directory.appendingPathComponent(address).path,
                database: "zoo", networkLatency: .milliseconds(10), leaderWait: TestTime.scaled(.seconds(20)))
        }
        defer { for replica in replicas { try? replica.stop() } }
        let client = try DqliteClient(
            addresses: addresses, database: "zoo", callTimeout: TestTime.scaled(.seconds(5)),
            leaderWait: TestTime.scaled(.seconds(10)))
        let onCluster = try Self.measure(
            try ZooLibrary(database: Database(cluster: client, migrations: ZooSchema.migrations)))

        #expect(onFile.found == onCluster.found && !onFile.found.isEmpty)
        func perRead(_ seconds: Double) -> String { String(format: "%.1f µs", seconds / Double(Self.reads) * 1e6) }
        print(
            "zoo sample load: SQLite file \(String(format: "%.0f ms", onFile.load * 1000)), 3 dqlite nodes "
                + "\(String(format: "%.0f ms", onCluster.load * 1000)); \(Self.reads) reads: \(perRead(onFile.reads)) a read on the file, "
                + "\(perRead(onCluster.reads)) on the cluster; debug build, one machine")
    }
}

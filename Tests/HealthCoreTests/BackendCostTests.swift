import Dqlite
import Foundation
import Storage
import TestSupport
import Testing

@testable import HealthCore

/// What replication costs a health push: 4,300 samples (about a day of a phone's and a watch's records) in one
/// batch, into the SQLite file on one node and into a three-node dqlite cluster in this process, in the same
/// run. Prints the figures; asserts only that both stores hold the same samples.
@Suite(.serialized) struct BackendCostTests {
    static let count = 4_300

    static func samples() -> [HealthSample] {
        let start = T.ms("2025-06-01T00:00:00+02:00")
        return (0..<count).map { index in
            let at = start + Int64(index) * 20_000
            return HealthSample(
                type: index % 3 == 0 ? .heartRate : .stepCount, value: Double(60 + index % 40), start: at,
                end: at + (index % 3 == 0 ? 0 : 20_000), source: index % 2 == 0 ? "iPhone" : "Apple Watch")
        }
    }

    /// Seconds to push the batch into `store` as a new user, and the samples' count read back.
    static func push(into store: HealthStore) throws -> (seconds: Double, stored: Int) {
        let user = try store.createUser(name: "walker").user.id
        let batch = samples()
        let started = ContinuousClock.now
        let result = try store.add(batch, user: user)
        let seconds = (ContinuousClock.now - started) / .seconds(1)
        #expect(result.anchor > 0)
        let stored = try store.database.read {
            try $0.queryOne("SELECT count(*) FROM samples WHERE user_id = ?", [user])?.int(0) ?? 0
        }
        return (seconds, stored)
    }

    @Test func pushOf4300SamplesOnOneSQLiteFileAndOnThreeDqliteNodes() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "BackendCost-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let file = try HealthStore(path: directory.appendingPathComponent("health.sqlite").path)
        let onFile = try Self.push(into: file)

        let onCluster = try Self.pushIntoThreeNodes(directory.appendingPathComponent("plain"), tls: nil)
        let certificates = try TestCertificates(name: "Cost CA")
        defer { certificates.remove() }
        let node = try certificates.issue("health")
        let tls = try ClusterTLS(certificateFile: node.certificate, keyFile: node.key, caFile: certificates.caFile)
        let overTLS = try Self.pushIntoThreeNodes(directory.appendingPathComponent("tls"), tls: tls)

        #expect(onFile.stored == Self.count && onCluster.stored == Self.count && overTLS.stored == Self.count)
        func ms(_ seconds: Double) -> String { String(format: "%.0f ms", seconds * 1000) }
        print(
            "health push of \(Self.count) samples: SQLite file \(ms(onFile.seconds)), 3 dqlite nodes \(ms(onCluster.seconds)) "
                + "(\(String(format: "%.1f", onCluster.seconds / onFile.seconds))×), 3 dqlite nodes over TLS \(ms(overTLS.seconds)) "
                + "(\(String(format: "%.2f", overTLS.seconds / onCluster.seconds))× plaintext's); debug build, one machine"
        )
    }

    /// The push into a fresh three-node cluster in this process (over `tls` when given).
    static func pushIntoThreeNodes(_ directory: URL, tls: ClusterTLS?) throws -> (seconds: Double, stored: Int) {
        let base = try RawSocket.freePortBlock(count: 3)
        let addresses = (0..<3).map { "127.0.0.1:\(base + $0)" }
        let replicas = try addresses.map { address in
            try DqliteReplica(
                addresses: addresses, ownAddress: address,
                dataDirectory: directory.appendingPathComponent(address).path,
                database: "health", networkLatency: .milliseconds(10), leaderWait: TestTime.scaled(.seconds(20)),
                tls: tls)
        }
        defer { for replica in replicas { try? replica.stop() } }
        let client = try DqliteClient(
            addresses: addresses, database: "health", callTimeout: TestTime.scaled(.seconds(5)),
            leaderWait: TestTime.scaled(.seconds(10)), tls: tls)
        return try push(into: HealthStore(database: try Database(cluster: client, migrations: HealthSchema.migrations)))
    }
}

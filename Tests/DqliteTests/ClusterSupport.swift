import Dqlite
import Foundation
import TestSupport

/// A cluster of dqlite nodes in this test process on free loopback ports, each with its own temporary data
/// directory (removed by `tearDown`). Node `i` (1-based) is `replicas[i - 1]`.
final class TestCluster {
    let addresses: [String]
    let directory: URL
    private(set) var replicas: [DqliteReplica?] = []
    /// Every node's TLS (`ClusterTLS`), when the cluster runs over it; the client's too.
    let tls: ClusterTLS?

    /// Starts `size` nodes: node 1 first (it bootstraps), then the others, each joining as a voter.
    init(size: Int, database: String = "test", tls: ClusterTLS? = nil) throws {
        self.tls = tls
        let base = try RawSocket.freePortBlock(count: size)
        addresses = (0..<size).map { "127.0.0.1:\(base + $0)" }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("DqliteTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for index in 0..<size { replicas.append(try start(node: index + 1, database: database)) }
    }

    func start(node: Int, database: String = "test") throws -> DqliteReplica {
        try DqliteReplica(
            addresses: addresses, ownAddress: addresses[node - 1],
            dataDirectory: directory.appendingPathComponent("node\(node)").path, database: database,
            networkLatency: .milliseconds(10), leaderWait: TestTime.scaled(.seconds(20)), tls: tls)
    }

    /// A client of the whole cluster that does not depend on any one node.
    func client(database: String = "test", leaderWait: Duration = TestTime.scaled(.seconds(20))) throws -> DqliteClient
    {
        try DqliteClient(
            addresses: addresses, database: database, callTimeout: TestTime.scaled(.seconds(2)), leaderWait: leaderWait,
            tls: tls)
    }

    func stop(node: Int) throws {
        try replicas[node - 1]?.stop()
        replicas[node - 1] = nil
    }

    func restart(node: Int) throws {
        replicas[node - 1] = try start(node: node)
    }

    func tearDown() {
        for replica in replicas { try? replica?.stop() }
        replicas = []
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { tearDown() }
}

/// A loopback port that takes connections into its backlog and never reads or answers: a node cut off, as a
/// client sees it (its connect succeeds, its request waits).
final class SilentListener {
    let address: String
    private var descriptor: Int32

    init() throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let descriptor = descriptor
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound, listen(descriptor, 16) == 0 else { throw POSIXError(.EADDRNOTAVAIL) }
        self.address = "127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
    }

    func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }

    deinit { close() }
}

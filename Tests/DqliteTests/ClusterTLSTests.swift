import Base
import Foundation
import TestSupport
import Testing

@testable import Dqlite

#if canImport(Glibc)
    import Glibc
#endif

/// A cluster over mutual TLS (`ClusterTLS`): each node's public address speaks only TLS, so a cluster that
/// replicates at all has its Raft traffic going through the relays, and clients get in only with a certificate of
/// the cluster's CA.
@Suite(.serialized) struct ClusterTLSTests {
    let certificates: TestCertificates
    let tls: ClusterTLS

    init() throws {
        certificates = try TestCertificates(name: "Cluster CA")
        let node = try certificates.issue("health")
        tls = try ClusterTLS(certificateFile: node.certificate, keyFile: node.key, caFile: certificates.caFile)
    }

    /// Over TLS the node listens on a private socket and its relay on the public address: a taken public address
    /// is refused with the reason as well, and the node is destroyed once.
    @Test func aNodeWhosePublicAddressIsTakenIsRefusedWithTheReason() throws {
        defer { certificates.remove() }
        let cluster = try TestCluster(size: 1, tls: tls)
        defer { cluster.tearDown() }
        let node = try DqliteNode(
            id: 2, address: cluster.addresses[0], dataDirectory: cluster.directory.appendingPathComponent("taken").path,
            tls: tls)
        #expect { try node.start() } throws: { error in
            let error = error as? DqliteError
            return error?.kind == .node && error?.message.contains(cluster.addresses[0]) == true
                && error?.message.contains("in use") == true
        }
    }

    @Test func threeNodesOverTLSReplicateAndFailOver() throws {
        defer { certificates.remove() }
        let cluster = try TestCluster(size: 3, tls: tls)
        defer { cluster.tearDown() }
        let client = try cluster.client()
        #expect(try client.members().map(\.id).sorted() == [1, 2, 3])
        let session = try client.connect()
        try session.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)")
        // Larger than a TLS record and than a socket pair's buffer: the relays carry it in parts.
        let payload = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try session.execute("INSERT INTO t (payload) VALUES (?)", [.blob(payload)])
        session.close()

        // Every node has it: leadership handed to each in turn answers with the same row.
        for member in try client.members() {
            if try client.leader()?.id != member.id { try client.transferLeadership(to: member.id) }
            let rows = try client.retryingRead { session throws(DqliteError) in
                try session.query("SELECT payload FROM t")
            }
            #expect(rows.rows == [[.blob(payload)]], "node \(member.id)")
        }

        let leader = try #require(try client.leader())
        try cluster.stop(node: Int(leader.id))
        let after = try client.connect()
        defer { after.close() }
        try after.execute("INSERT INTO t (payload) VALUES (x'01')")
        #expect(try after.query("SELECT count(*) FROM t").rows == [[.integer(2)]])
    }

    @Test func clientsWithoutTheClustersCertificatesAreRefused() throws {
        defer { certificates.remove() }
        let cluster = try TestCluster(size: 1, tls: tls)
        defer { cluster.tearDown() }
        try cluster.client().connect().execute("CREATE TABLE t (x)")

        // Plaintext to a node over TLS: the relay refuses it, and the client finds no leader.
        let plaintext = try DqliteClient(
            addresses: cluster.addresses, database: "test", callTimeout: TestTime.scaled(.seconds(1)),
            leaderWait: TestTime.scaled(.milliseconds(500)))
        #expect { try plaintext.connect() } throws: { ($0 as? DqliteError)?.kind == .noLeader }

        // A certificate of another CA: refused at the handshake.
        let foreign = try TestCertificates(name: "Other CA")
        defer { foreign.remove() }
        let stranger = try foreign.issue("stranger")
        let strangerTLS = try ClusterTLS(
            certificateFile: stranger.certificate, keyFile: stranger.key, caFile: foreign.caFile)
        let impostor = try DqliteClient(
            addresses: cluster.addresses, database: "test", callTimeout: TestTime.scaled(.seconds(1)),
            leaderWait: TestTime.scaled(.milliseconds(500)), tls: strangerTLS)
        #expect { try impostor.connect() } throws: { ($0 as? DqliteError)?.kind == .noLeader }

        // A client of the right CA still gets in.
        #expect(try cluster.client().connect().query("SELECT count(*) FROM t").rows == [[.integer(0)]])
    }

    /// Members whose certificates name their role (OU=member, as compose issues them) let in only members and the
    /// operator: the gateway's certificate of the same CA — which every client of a TLS stack holds — read every
    /// row before (`gateway cluster backup` with it, as with the operator's).
    @Test func membersNamingTheirRoleAdmitOnlyMembersAndTheOperator() throws {
        defer { certificates.remove() }
        let member = try certificates.issue("health", file: "health-member", unit: ClusterTLS.memberRole)
        let memberTLS = try ClusterTLS(
            certificateFile: member.certificate, keyFile: member.key, caFile: certificates.caFile)
        let cluster = try TestCluster(size: 1, tls: memberTLS)
        defer { cluster.tearDown() }
        try cluster.client().connect().execute("CREATE TABLE t (x)")
        func client(_ commonName: String, unit: String?) throws -> DqliteClient {
            let pair = try certificates.issue(commonName, file: "\(commonName)-\(unit ?? "none")", unit: unit)
            return try DqliteClient(
                addresses: cluster.addresses, database: "test", callTimeout: TestTime.scaled(.seconds(1)),
                leaderWait: TestTime.scaled(.milliseconds(500)),
                tls: try ClusterTLS(certificateFile: pair.certificate, keyFile: pair.key, caFile: certificates.caFile))
        }
        let gateway = try client("gateway", unit: nil)
        #expect { try gateway.connect().query("SELECT count(*) FROM t") } throws: {
            ($0 as? DqliteError)?.kind == .noLeader
        }
        let zoo = try client("zoo", unit: "service")
        #expect { try zoo.members() } throws: { ($0 as? DqliteError)?.kind == .noLeader }
        let operatorClient = try client("menagerie-operator", unit: ClusterTLS.operatorRole)
        #expect(try operatorClient.connect().query("SELECT count(*) FROM t").rows == [[.integer(0)]])
        #expect(try operatorClient.members().map(\.id) == [1])
        // A member whose certificate names no role (made before roles) admits any certificate of the CA, as before.
        #expect(
            tls.admittedRoles == nil && memberTLS.admittedRoles == [ClusterTLS.memberRole, ClusterTLS.operatorRole])
        #expect(ClusterTLS.roles(of: "CN=health,OU=member,O=Menagerie") == ["member"])
    }

    @Test func aPeerThatNeverFinishesItsHandshakeDoesNotHoldTheNode() throws {
        defer { certificates.remove() }
        let cluster = try TestCluster(size: 1, tls: tls)
        defer { cluster.tearDown() }
        // Connections that send nothing: each waits out its handshake limit on a thread of its own.
        let port = try #require(cluster.addresses[0].split(separator: ":").last.flatMap { Int($0) })
        let idle = try (0..<8).map { _ in try RawSocket(port: port) }
        defer { withExtendedLifetime(idle) {} }
        let session = try cluster.client().connect()
        defer { session.close() }
        try session.execute("CREATE TABLE t (x)")
        #expect(try session.query("SELECT count(*) FROM t").rows == [[.integer(0)]])
    }

    /// A client sends its first request right after its handshake, often in the same segment as its Finished: the
    /// relay must open what came with the handshake's end before waiting on the socket again (it waited for the
    /// client's timeout instead, seen as fresh connections answered after 2 s, or not at all).
    @Test func aRequestSentRightAfterTheHandshakeIsAnswered() throws {
        defer { certificates.remove() }
        let cluster = try TestCluster(size: 1, tls: tls)
        defer { cluster.tearDown() }
        try cluster.client().connect().execute("CREATE TABLE t (x)")
        let started = ContinuousClock.now
        for _ in 0..<20 {
            let fresh = try DqliteClient(
                addresses: cluster.addresses, database: "test", callTimeout: TestTime.scaled(.seconds(2)),
                leaderWait: TestTime.scaled(.seconds(2)), tls: tls)
            let session = try fresh.connect()
            defer { session.close() }
            #expect(try session.query("SELECT count(*) FROM t").rows == [[.integer(0)]])
        }
        #expect(
            ContinuousClock.now - started < TestTime.scaled(.seconds(20)), "fresh connections waited for their timeouts"
        )
    }

    /// A relay's listener that stops closes every descriptor it made: the write end of its wake-up pipe stayed open,
    /// one descriptor lost each time a node over TLS started and stopped.
    @Test func aStoppedRelayListenerLeavesNoDescriptorOpen() async throws {
        defer { certificates.remove() }
        func openDescriptors() -> Int {
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
        }
        func listenAndStop() throws {
            let port = try RawSocket.freePortBlock(count: 1)
            try tls.listen(on: "127.0.0.1:\(port)", forwardingTo: "@menagerie-test-no-node").stop()
        }
        // Once first, so that what is opened once per process (and the certificates' tool's pipes closing) is done.
        try listenAndStop()
        try await Task.sleep(for: TestTime.scaled(.milliseconds(500)))
        // The count is the whole process's: measured up to three times, as a leak shows in each (five more every time)
        // and descriptors other threads hold meanwhile rarely in all three.
        var grown = 0
        for _ in 0..<3 {
            let before = openDescriptors()
            for _ in 0..<5 { try listenAndStop() }
            // The accepting threads close the listening sockets and the pipes' read ends once woken.
            let deadline = ContinuousClock.now + TestTime.scaled(.seconds(5))
            while openDescriptors() > before, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            grown = openDescriptors() - before
            if grown <= 0 { break }
        }
        #expect(grown <= 0, "five listeners started and stopped left \(grown) descriptors open")
    }

    @Test func credentialsThatDoNotLoadAreAClearError() throws {
        defer { certificates.remove() }
        #expect {
            try ClusterTLS(
                certificateFile: "/nonexistent.pem", keyFile: "/nonexistent.key", caFile: certificates.caFile)
        } throws: {
            let error = $0 as? DqliteError
            return error?.kind == .misuse && error?.message.contains("/nonexistent.pem") == true
        }
    }
}

import Base
import TestSupport
import Testing

@testable import Dqlite

/// Real dqlite nodes (libdqlite's own threads) in this process, reached through the Swift client over loopback.
@Suite(.serialized) struct ClusterTests {
    @Test func oneNodeRunsStatementsAndReturnsEveryType() throws {
        let cluster = try TestCluster(size: 1)
        defer { cluster.tearDown() }
        let session = try cluster.client().connect()
        defer { session.close() }
        try session.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n TEXT)")
        let inserted = try session.execute(
            "INSERT INTO t VALUES (?, ?, ?, ?, ?)",
            [.integer(-42), .real(2.5), .text("žluťoučký kůň"), .blob([0, 1, 255]), .null])
        #expect(inserted.rowsAffected == 1 && inserted.lastInsertID == 1)
        let rows = try session.query("SELECT i, r, s, b, n, x'' AS empty FROM t")
        #expect(rows.columns == ["i", "r", "s", "b", "n", "empty"])
        #expect(
            rows.rows == [[.integer(-42), .real(2.5), .text("žluťoučký kůň"), .blob([0, 1, 255]), .null, .blob([])]])
    }

    @Test func manyRowsArriveInPartsAndAreJoined() throws {
        let cluster = try TestCluster(size: 1)
        defer { cluster.tearDown() }
        let session = try cluster.client().connect()
        defer { session.close() }
        try session.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, payload TEXT)")
        try session.execute("BEGIN", mayCommit: false)
        let insert = try session.prepare("INSERT INTO t (payload) VALUES (?)")
        #expect(insert.parameterCount == 1)
        for index in 0..<3000 {
            try session.execute(insert, [.text(String(repeating: "x", count: index % 100))], mayCommit: false)
        }
        try session.finalize(insert)
        try session.execute("COMMIT")
        let rows = try session.query("SELECT id, payload FROM t ORDER BY id")
        #expect(rows.rows.count == 3000)
        #expect(rows.rows.last == [.integer(3000), .text(String(repeating: "x", count: 99))])
    }

    @Test func sqliteErrorsCarryTheirCodeAndCategory() throws {
        let cluster = try TestCluster(size: 1)
        defer { cluster.tearDown() }
        let session = try cluster.client().connect()
        defer { session.close() }
        try session.execute("CREATE TABLE t (name TEXT UNIQUE)")
        try session.execute("INSERT INTO t VALUES ('a')")
        #expect { try session.execute("INSERT INTO t VALUES ('a')") } throws: { error in
            let error = error as? DqliteError
            return error?.kind == .sqlite && error?.category == .failedPrecondition
        }
        #expect { try session.query("SELEC nonsense") } throws: { ($0 as? DqliteError)?.kind == .sqlite }
        #expect(try session.query("SELECT count(*) FROM t").rows == [[.integer(1)]])  // the session still works
    }

    @Test func noNodeUpIsNoLeaderWithinTheWait() throws {
        let client = try DqliteClient(addresses: ["127.0.0.1:1"], database: "test", leaderWait: .milliseconds(200))
        #expect { try client.connect() } throws: { error in
            (error as? DqliteError)?.kind == .noLeader && (error as? DqliteError)?.category == .unavailable
        }
    }

    /// A node whose address another program listens on is refused with the reason, and made once: its failed
    /// init used to destroy the dqlite node and then its deinit destroyed it again (glibc aborted the process on the
    /// double free — an ocr whose cluster port was health's service port, in CI).
    @Test func aNodeWhoseAddressIsTakenIsRefusedWithTheReason() throws {
        let cluster = try TestCluster(size: 1)
        defer { cluster.tearDown() }
        #expect {
            try DqliteNode(
                id: 2, address: cluster.addresses[0],
                dataDirectory: cluster.directory.appendingPathComponent("taken").path)
        } throws: { error in
            let error = error as? DqliteError
            return error?.kind == .node
                && error?.message.contains("cannot listen on \(cluster.addresses[0]): Address already in use") == true
        }
        // The node that holds the address still answers.
        let session = try cluster.client().connect()
        defer { session.close() }
        #expect(try session.query("SELECT 1").rows == [[.integer(1)]])
    }

    @Test func threeNodesReplicateAndTheSurvivorsElectANewLeaderThatTakesWrites() throws {
        let cluster = try TestCluster(size: 3)
        defer { cluster.tearDown() }
        let client = try cluster.client()
        let members = try client.members()
        #expect(members.map(\.id).sorted() == [1, 2, 3])
        #expect(members.allSatisfy { $0.role == .voter })

        let session = try client.connect()
        try session.execute("CREATE TABLE samples (id INTEGER PRIMARY KEY, value REAL NOT NULL)")
        try session.execute("INSERT INTO samples (value) VALUES (?)", [.real(1)])
        session.close()

        let oldLeader = try #require(try client.leader())
        try cluster.stop(node: Int(oldLeader.id))

        let started = ContinuousClock.now
        let rows = try client.retryingRead { session throws(DqliteError) in
            try session.query("SELECT value FROM samples")
        }
        #expect(rows.rows == [[.real(1)]])
        let newLeader = try #require(try client.leader())
        #expect(newLeader.id != oldLeader.id)
        let failover = ContinuousClock.now - started
        print("dqlite failover after stopping node \(oldLeader.id): \(failover) until node \(newLeader.id) answered")

        let after = try client.connect()
        defer { after.close() }
        try after.execute("INSERT INTO samples (value) VALUES (?)", [.real(2)])
        #expect(try after.query("SELECT count(*) FROM samples").rows == [[.integer(2)]])

        // The stopped node comes back from its data directory and catches up; leadership can move to it.
        try cluster.restart(node: Int(oldLeader.id))
        try client.transferLeadership(to: oldLeader.id)
        let back = try client.retryingRead { session throws(DqliteError) in
            (session.leaderAddress, try session.query("SELECT count(*) FROM samples"))
        }
        #expect(back.0 == oldLeader.address)
        #expect(back.1.rows == [[.integer(2)]])
    }

    @Test func timeoutsFollowTheNetworkLatency() {
        #expect(DqliteClient.timeouts(networkLatency: .milliseconds(20)) == (.seconds(3), .milliseconds(500)))
        #expect(DqliteClient.timeouts(networkLatency: .milliseconds(1)) == (.seconds(1), .milliseconds(250)))
        #expect(DqliteClient.timeouts(networkLatency: .milliseconds(200)) == (.seconds(5), .seconds(5)))
        #expect(DqliteClient.timeouts(networkLatency: nil) == (.seconds(5), .seconds(5)))
    }

    /// A node that accepts connections and never answers (one cut off, as seen from here) costs the leader search
    /// its discovery timeout once; after that it is asked last, and the search answers at once from the others.
    @Test func aNodeThatDidNotAnswerIsAskedLast() throws {
        let cluster = try TestCluster(size: 1)
        defer { cluster.tearDown() }
        let silent = try SilentListener()
        defer { silent.close() }
        // The bounds scale with the discovery timeout: the silent node asked first costs about one; asked last, a
        // small part of one.
        let discovery = TestTime.scaled(.milliseconds(400))
        let client = try DqliteClient(
            addresses: [silent.address, cluster.addresses[0]], database: "test",
            callTimeout: TestTime.scaled(.seconds(5)),
            discoveryTimeout: discovery, leaderWait: TestTime.scaled(.seconds(5)))
        var started = ContinuousClock.now
        #expect(try client.leader()?.address == cluster.addresses[0])
        let first = ContinuousClock.now - started
        started = ContinuousClock.now
        #expect(try client.leader()?.address == cluster.addresses[0])
        let second = ContinuousClock.now - started
        #expect(first >= discovery * 0.875, "the silent node was not asked first: \(first)")
        #expect(second < discovery / 2, "the silent node was asked first again: \(second)")
        // A session still gets the call's timeout, not the discovery's: a statement may take longer than a search.
        let session = try client.connect()
        defer { session.close() }
        #expect(try session.query("SELECT 1").rows == [[.integer(1)]])
    }

    /// A statement sent to a leader that went silent (a listener that never answers: a leader cut off, as a replica
    /// on the majority's side sees it) stops waiting once this process's own node names another leader, rather than
    /// waiting out the call timeout; the answer is unknown (the old leader may have acted on it). With the own node
    /// naming the silent one, the statement waits as before.
    @Test func aStatementOnASilentLeaderEndsWhenTheOwnNodeNamesAnother() throws {
        let cluster = try TestCluster(size: 1)
        defer { cluster.tearDown() }
        let silent = try SilentListener()
        defer { silent.close() }
        var request = WireEncoder()
        request.uint64(0)
        func wait(watching node: String?, timeout: Duration) throws -> (Duration, DqliteError?) {
            let connection = try WireConnection(address: silent.address, timeout: timeout)
            defer { connection.close() }
            connection.leaderWatch = node.map {
                LeaderWatch(address: $0, timeout: TestTime.scaled(.seconds(1)), tls: nil)
            }
            let started = ContinuousClock.now
            do {
                _ = try DqliteSession.call(
                    connection, request.message(type: WireType.leader), expecting: WireType.node, mayCommit: true)
                return (ContinuousClock.now - started, nil)
            } catch {
                return (ContinuousClock.now - started, error)
            }
        }
        let (watched, error) = try wait(watching: cluster.addresses[0], timeout: TestTime.scaled(.seconds(10)))
        #expect(watched < TestTime.scaled(.seconds(2)), "waited \(watched) on a leader the own node no longer names")
        #expect(
            error?.kind == .outcomeUnknown
                && error?.message.contains("names \(cluster.addresses[0]) the leader") == true,
            "\(String(describing: error))")
        // A node that cannot be asked names nobody: the call's timeout stands.
        let (unwatched, _) = try wait(watching: silent.address, timeout: .milliseconds(800))
        #expect(unwatched >= .milliseconds(750), "gave up after \(unwatched) with nobody else named")
    }

    @Test func removedMembersStopCountingAndTheLastVoterStays() throws {
        let cluster = try TestCluster(size: 3)
        defer { cluster.tearDown() }
        let client = try cluster.client()
        // Every node a voter once its join returned (not a spare still being caught up).
        #expect(try client.members().map(\.role) == [.voter, .voter, .voter])
        // The leader itself: leadership moves first, and the others go on taking writes.
        let leader = try #require(try client.leader())
        try client.remove(id: leader.id)
        try client.remove(id: leader.id)  // again: nothing to do
        let others = [UInt64(1), 2, 3].filter { $0 != leader.id }
        #expect(try client.members().map(\.id).sorted() == others)
        #expect(try client.members().allSatisfy { $0.role == .voter }, "the others still vote after the leader left")
        #expect(try client.leader().map { others.contains($0.id) } == true)
        try cluster.stop(node: Int(leader.id))

        // Down to one voter: with the removed node stopped, a quorum of one still commits.
        try client.remove(id: others[0])
        try cluster.stop(node: Int(others[0]))
        let session = try client.connect()
        defer { session.close() }
        try session.execute("CREATE TABLE t (v INTEGER)")
        try session.execute("INSERT INTO t VALUES (1)")
        #expect(try session.query("SELECT count(*) FROM t").rows == [[.integer(1)]])
        #expect { try client.remove(id: others[1]) } throws: { ($0 as? DqliteError)?.kind == .misuse }
        #expect(try client.members().map(\.id) == [others[1]])
    }

    @Test func aLeaderLostMidTransactionIsNotCommittedAndNothingIsWritten() throws {
        let cluster = try TestCluster(size: 3)
        defer { cluster.tearDown() }
        let client = try cluster.client()
        let setup = try client.connect()
        try setup.execute("CREATE TABLE t (v INTEGER)")
        setup.close()
        let session = try client.connect()
        try session.execute("BEGIN", mayCommit: false)
        try session.execute("INSERT INTO t VALUES (1)", mayCommit: false)
        let leader = try #require(try client.leader())
        try cluster.stop(node: Int(leader.id))
        #expect { try session.execute("INSERT INTO t VALUES (2)", mayCommit: false) } throws: { error in
            (error as? DqliteError)?.kind == .notCommitted
        }
        #expect(session.isBroken)
        let count = try client.retryingRead { session throws(DqliteError) in try session.query("SELECT count(*) FROM t")
        }
        #expect(count.rows == [[.integer(0)]])
    }
}

/// A client learns the cluster's members from the leader: given one node, it finds the others and keeps working
/// when that node is removed and gone; a given node that has not joined yet is not forgotten.
@Suite(.serialized) struct MembershipDiscoveryTests {
    @Test func aClientGivenOneNodeLearnsTheOthersAndForgetsARemovedOne() throws {
        let cluster = try TestCluster(size: 3)
        defer { cluster.tearDown() }
        let first = cluster.addresses[0]
        let client = try DqliteClient(
            addresses: [first], database: "test", callTimeout: TestTime.scaled(.seconds(2)),
            leaderWait: TestTime.scaled(.seconds(20)))
        let session = try client.connect()
        try session.execute("CREATE TABLE t (x)")
        session.close()
        #expect(Set(client.addresses) == Set(cluster.addresses), "\(client.addresses)")

        // Node 1 leaves the cluster and stops: the client, given only node 1, still finds the leader.
        let admin = try cluster.client()
        try admin.remove(id: 1)
        try cluster.stop(node: 1)
        #expect(try client.members().map(\.id).sorted() == [2, 3])
        #expect(client.addresses.sorted() == Array(cluster.addresses[1...]).sorted(), "\(client.addresses)")
        let after = try client.connect()
        defer { after.close() }
        try after.execute("INSERT INTO t VALUES (1)")
        #expect(try after.query("SELECT count(*) FROM t").rows == [[.integer(1)]])
    }

    @Test func aGivenNodeNotYetAMemberIsKept() throws {
        let cluster = try TestCluster(size: 1)
        defer { cluster.tearDown() }
        let notYet = "127.0.0.1:1"
        let client = try DqliteClient(
            addresses: [cluster.addresses[0], notYet], database: "test", callTimeout: TestTime.scaled(.seconds(2)))
        _ = try client.members()
        #expect(client.addresses == [cluster.addresses[0], notYet])
    }
}

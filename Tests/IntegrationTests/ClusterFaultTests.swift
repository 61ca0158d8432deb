import Dqlite
import Foundation
import GatewayKit
import HealthAPI
import OCRAPI
import RPC
import Synchronization
import TestSupport
import Testing
import Transport

/// Jepsen's way, on `compose up --nodes 3` with health and ocr on every node (a dqlite cluster each): clients push
/// health samples and add OCR records through different nodes while the leader's node is killed with `kill -9`,
/// restarted from its disk, and the next leader's node is cut off and healed. Every write is recorded with its
/// outcome; afterwards every acknowledged write is present exactly once through every node, none was acknowledged
/// by the cut-off node alone, and each node's copy of each database (the leader in turn) passes
/// `PRAGMA integrity_check` and dumps the same rows. Bounded (about a minute); needs root and `ip netns`; skips,
/// saying so, elsewhere.
@Suite(
    .serialized, .timeLimit(.minutes(4)),
    .enabled(if: Nodes.available, "needs root and ip netns (iproute2): compose up --nodes makes network namespaces"))
struct ClusterFaultTests {
    /// One write as a client saw it: through which node, when, and how it ended.
    struct Operation: Sendable {
        enum Outcome: Sendable { case ok, failed, unknown }
        /// "health" (samples, named by UUID) or "ocr" (a record, named by its one value's text).
        let service: String
        let client: Int
        let node: Int
        let uuids: [String]
        let started: ContinuousClock.Instant
        let ended: ContinuousClock.Instant
        let outcome: Outcome
        let detail: String
    }

    /// The faults, as the nemesis injected them.
    struct Faults: Sendable {
        var killedNode = 0, killedAt: ContinuousClock.Instant?, restartedAt: ContinuousClock.Instant?
        var partitionedNode = 0, partitionedAt: ContinuousClock.Instant?, healStartedAt: ContinuousClock.Instant?
    }

    /// What the clients share: the history they append to, and the nemesis' word to stop.
    final class Run: Sendable {
        let history = Mutex<[Operation]>([])
        let stop = Atomic<Bool>(false)
    }

    static let clients = 3
    static let batch = 3
    /// Short enough that a call into a cut-off node ends well before heal; long enough for a loaded commit.
    static let callTimeout = TestTime.scaled(.seconds(3))
    /// How long the nemesis lets the clients write between faults: scaled like the calls, so a loaded machine still
    /// has the restarted node back before the leader is cut off, and the cut-off node's calls end before heal.
    static func phase(_ seconds: Int64) -> Duration { TestTime.scaled(.seconds(seconds)) }
    /// The test's own cluster clients' bounds (who leads, transfers, the dumps).
    static let clusterCallTimeout = TestTime.scaled(.seconds(2)), leaderWait = TestTime.scaled(.seconds(15))
    /// A read that may meet a node still catching up: its deadline, and the pause between its attempts.
    static let readTimeout = TestTime.scaled(.seconds(10)), retryPause = TestTime.scaled(.milliseconds(500))
    /// The pause between attempts to hand leadership over, in microseconds.
    static let transferPause = UInt32(300_000 * TestTime.scale)

    /// Plaintext, and with `--tls`: the services' calls and the clusters' Raft traffic and statements over mutual TLS.
    @Test(arguments: [false, true])
    func acknowledgedWritesSurviveAKilledLeaderAPartitionAndARestart(tls useTLS: Bool) async throws {
        let network = Nodes.freeNetwork()
        defer { Nodes.removeLeftovers(tag: network.tag) }
        try await Stack.with(services: ["health", "ocr"]) { stack in
            func compose(_ arguments: String...) async throws -> (status: Int32, output: String) {
                try await stack.compose(environment: network.environment, arguments)
            }
            let up = try await (useTLS ? compose("up", "--nodes", "3", "--tls") : compose("up", "--nodes", "3"))
            try #require(up.status == 0, "compose up --nodes 3 failed: \(up.output)")
            // The gateway's certificate, found in the stack's state as the gateway finds it there (the environment's
            // MENAGERIE_TLS_DIR left out), for the test's own calls and cluster clients.
            let tls =
                try useTLS
                ? ClientTLSOptions.parse([]).credentials(stateDirectory: stack.state.path, environment: [:]) : nil
            try #require(!useTLS || tls != nil, "compose up --tls left no CA in \(stack.state.path)/tls")
            // The clusters run over mutual TLS on every stack of nodes, which admits the operator's certificate.
            let clusterTLS = try stack.operatorClusterTLS()
            let port = try #require(stack.basePorts["health"])
            let endpoints = (1...3).map { "\(network.subnet).\(10 + $0):\(port)" }
            let members = (1...3).map { "\(network.subnet).\(10 + $0):\(port + 1000)" }
            let cluster = try DqliteClient(
                addresses: members, database: "health", callTimeout: Self.clusterCallTimeout,
                leaderWait: Self.leaderWait, tls: clusterTLS)
            func leaderNode() async throws -> Int? {
                let leader = try await offPool { try cluster.leader() }
                return leader.flatMap { members.firstIndex(of: $0.address) }.map { $0 + 1 }
            }
            let firstLeader = try #require(try await leaderNode(), "no node knows the cluster's leader")
            let ocrPort = try #require(stack.basePorts["ocr"])
            let ocrEndpoints = (1...3).map { "\(network.subnet).\(10 + $0):\(ocrPort)" }
            let ocrMembers = (1...3).map { "\(network.subnet).\(10 + $0):\(ocrPort + 1000)" }
            let template = "jepsen-\(UUID().uuidString.prefix(8).lowercased())"
            try await Self.createTemplate(template, through: ocrEndpoints[0], tls: tls)

            // A user per client (through node 1; the users live in the replicated database too).
            let tokens = try await withClient(endpoints[0], tls: tls) { client in
                var tokens: [String] = []
                // Signing up needs the stack's admin (health.proto).
                let admin = CallOptions(metadata: ["authorization": "Bearer \(Stack.adminToken)"])
                for index in 0..<Self.clients {
                    tokens.append(try await client.createUser(.init(name: "jepsen\(index)"), options: admin).token)
                }
                return tokens
            }

            // Clients: client k writes through node k+1 until told to stop, a new batch of new UUIDs each time.
            let run = Run()
            let origin = ContinuousClock.now
            // OCR clients alike: a record of one value (a new UUID) each time.
            let ocrTasks = (0..<Self.clients).map { index in
                Task {
                    while !run.stop.load(ordering: .relaxed) {
                        let operation = await Self.addRecord(
                            UUID().uuidString.lowercased(), to: template, through: ocrEndpoints[index], tls: tls,
                            client: index, node: index + 1)
                        run.history.withLock { $0.append(operation) }
                        if operation.outcome != .ok { try? await Task.sleep(for: .milliseconds(100)) }
                        try? await Task.sleep(for: .milliseconds(100))
                    }
                }
            }
            let clientTasks =
                ocrTasks
                + (0..<Self.clients).map { index in
                    Task {
                        let node = index + 1
                        var sequence: Int64 = 0
                        while !run.stop.load(ordering: .relaxed) {
                            let samples = (0..<Self.batch).map { _ -> HealthV1.Sample in
                                sequence += 1
                                var sample = HealthV1.Sample()
                                sample.uuid = UUID().uuidString.lowercased()  // as the service answers it
                                sample.type = "stepCount"
                                sample.value = Double(sequence)
                                sample.startMs = 1_767_225_600_000 + sequence * 60_000
                                sample.endMs = sample.startMs + 30_000
                                sample.source = "jepsen client \(index)"
                                return sample
                            }
                            let operation = await Self.push(
                                samples, through: endpoints[index], tls: tls, token: tokens[index], client: index,
                                node: node)
                            run.history.withLock { $0.append(operation) }
                            if operation.outcome != .ok { try? await Task.sleep(for: .milliseconds(100)) }
                            try? await Task.sleep(for: .milliseconds(50))
                        }
                    }
                }
            func acknowledged(after instant: ContinuousClock.Instant, notThrough node: Int) -> Bool {
                run.history.withLock { $0.contains { $0.outcome == .ok && $0.started > instant && $0.node != node } }
            }
            func waitAcknowledged(after instant: ContinuousClock.Instant, notThrough node: Int) async throws {
                let deadline = ContinuousClock.now + TestTime.scaled(.seconds(30))
                while !acknowledged(after: instant, notThrough: node), ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }

            // The nemesis.
            var faults = Faults()
            try await Task.sleep(for: Self.phase(4))
            faults.killedNode = try #require(try await leaderNode())
            #expect(try await compose("node", "kill", "\(faults.killedNode)").status == 0)
            faults.killedAt = ContinuousClock.now  // its processes are gone once kill returns
            try await waitAcknowledged(after: faults.killedAt!, notThrough: faults.killedNode)
            try await Task.sleep(for: Self.phase(3))
            let restart = try await compose("node", "restart", "\(faults.killedNode)")
            #expect(restart.status == 0, "node restart: \(restart.output)")
            faults.restartedAt = ContinuousClock.now
            try await Task.sleep(for: Self.phase(3))
            faults.partitionedNode = try #require(try await leaderNode())
            let partition = try await compose("node", "partition", "\(faults.partitionedNode)")
            #expect(partition.status == 0, "node partition: \(partition.output)")
            faults.partitionedAt = ContinuousClock.now
            // When Raft itself has a new leader, asked of the majority's nodes only.
            let majority = try DqliteClient(
                addresses: members.enumerated().filter { $0.offset != faults.partitionedNode - 1 }.map(\.element),
                database: "health",
                callTimeout: TestTime.scaled(.seconds(1)), tls: clusterTLS)
            var elected: Duration?
            while elected == nil, ContinuousClock.now - faults.partitionedAt! < TestTime.scaled(.seconds(20)) {
                if let leader = try? await offPool({ try majority.leader() }),
                    leader.address != members[faults.partitionedNode - 1]
                {
                    elected = ContinuousClock.now - faults.partitionedAt!
                } else {
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            try await waitAcknowledged(after: faults.partitionedAt!, notThrough: faults.partitionedNode)
            try await Task.sleep(for: Self.phase(4))
            faults.healStartedAt = ContinuousClock.now
            #expect(try await compose("node", "heal").status == 0)
            try await Task.sleep(for: Self.phase(4))
            run.stop.store(true, ordering: .relaxed)
            for task in clientTasks { await task.value }
            let everything = run.history.withLock { $0 }
            let operations = everything.filter { $0.service == "health" }
            let ocrOperations = everything.filter { $0.service == "ocr" }

            // Nothing acknowledged by the cut-off node alone: a write through it that began after the cut and
            // ended before heal did not succeed.
            let minorityAcks = everything.filter {
                $0.node == faults.partitionedNode && $0.outcome == .ok && $0.started > faults.partitionedAt!
                    && $0.ended < faults.healStartedAt!
            }
            let minorityAckCount = minorityAcks.count
            #expect(
                minorityAckCount == 0,
                "\(minorityAckCount) write(s) acknowledged through the partitioned node \(faults.partitionedNode)")
            let throughMinority = everything.filter {
                $0.node == faults.partitionedNode && $0.started > faults.partitionedAt!
                    && $0.ended < faults.healStartedAt!
            }

            // Every acknowledged write, exactly once, through every node (after heal); nothing never written.
            let acknowledgedUUIDs = Set(operations.filter { $0.outcome == .ok }.flatMap(\.uuids))
            let attempted = Set(operations.flatMap(\.uuids))
            var storedCount = 0
            for (index, endpoint) in endpoints.enumerated() {
                var seen: [String: Int] = [:]
                for token in tokens {
                    let samples = try await Self.readAll(through: endpoint, tls: tls, token: token)
                    for sample in samples { seen[sample.uuid, default: 0] += 1 }
                }
                let missing = acknowledgedUUIDs.subtracting(seen.keys)
                let duplicated = seen.filter { $0.value > 1 }.map(\.key)
                let invented = Set(seen.keys).subtracting(attempted)
                let (missingCount, duplicatedCount, inventedCount) = (missing.count, duplicated.count, invented.count)
                #expect(
                    missingCount == 0,
                    "node \(index + 1) lacks \(missingCount) acknowledged sample(s), e.g. \(Array(missing.prefix(3)))")
                #expect(duplicatedCount == 0, "node \(index + 1) has \(duplicatedCount) sample(s) more than once")
                #expect(
                    inventedCount == 0,
                    "node \(index + 1) has \(inventedCount) sample(s) nobody wrote, e.g. \(Array(invented.prefix(3)))")
                storedCount = seen.count
            }

            // The same for OCR's records: every acknowledged one exactly once through every node.
            let ocrAcknowledged = Set(ocrOperations.filter { $0.outcome == .ok }.flatMap(\.uuids))
            let ocrAttempted = Set(ocrOperations.flatMap(\.uuids))
            var ocrStored = 0
            for (index, endpoint) in ocrEndpoints.enumerated() {
                var seen: [String: Int] = [:]
                for text in try await Self.recordTexts(of: template, through: endpoint, tls: tls) {
                    seen[text, default: 0] += 1
                }
                let (missing, duplicated, invented) = (
                    ocrAcknowledged.subtracting(seen.keys).count, seen.filter { $0.value > 1 }.count,
                    Set(seen.keys).subtracting(ocrAttempted).count
                )
                #expect(missing == 0, "ocr on node \(index + 1) lacks \(missing) acknowledged record(s)")
                #expect(duplicated == 0, "ocr on node \(index + 1) has \(duplicated) record(s) more than once")
                #expect(invented == 0, "ocr on node \(index + 1) has \(invented) record(s) nobody wrote")
                ocrStored = seen.count
            }

            // Each node's own copy: leadership handed to it (dqlite serves statements on the leader only), then
            // integrity_check and a dump of the samples, the same on all three.
            var dumps: [Int: String] = [:]
            for node in 1...3 {
                let (integrity, dump, leader) = try await offPool { () throws -> (String, String, String) in
                    // Raft refuses a transfer to the leader itself (BADID), and a node may still name the leader it
                    // had a moment ago: transfer until the nodes name this one.
                    for attempt in 1...20 where try cluster.leader()?.address != members[node - 1] {
                        do { try cluster.transferLeadership(to: UInt64(node)) } catch  where attempt < 20 {
                            usleep(Self.transferPause)
                        }
                    }
                    let session = try cluster.connect()
                    defer { session.close() }
                    let integrity = try session.query("PRAGMA integrity_check").rows.map { "\($0)" }.joined(
                        separator: ";")
                    let rows = try session.query(
                        "SELECT hex(uuid), user_id, value, start_ms, end_ms FROM samples ORDER BY user_id, uuid"
                    ).rows
                    return (integrity, rows.map { "\($0)" }.joined(separator: "\n"), session.leaderAddress)
                }
                #expect(leader == members[node - 1], "leadership went to \(leader), not node \(node)")
                #expect(
                    integrity == "[Dqlite.DqliteValue.text(\"ok\")]", "integrity_check on node \(node): \(integrity)")
                dumps[node] = dump
            }
            #expect(dumps[1] == dumps[2] && dumps[2] == dumps[3], "the nodes' copies differ")
            let ocrCluster = try DqliteClient(
                addresses: ocrMembers, database: "ocr", callTimeout: Self.clusterCallTimeout,
                leaderWait: Self.leaderWait, tls: clusterTLS)
            var ocrDumps: [Int: String] = [:]
            for node in 1...3 {
                let (integrity, dump) = try await offPool { () throws -> (String, String) in
                    for attempt in 1...20 where try ocrCluster.leader()?.address != ocrMembers[node - 1] {
                        do { try ocrCluster.transferLeadership(to: UInt64(node)) } catch  where attempt < 20 {
                            usleep(Self.transferPause)
                        }
                    }
                    let session = try ocrCluster.connect()
                    defer { session.close() }
                    let integrity = try session.query("PRAGMA integrity_check").rows.map { "\($0)" }.joined(
                        separator: ";")
                    let rows = try session.query(
                        "SELECT record_id, position, text FROM record_values ORDER BY record_id, position"
                    ).rows
                    return (integrity, rows.map { "\($0)" }.joined(separator: "\n"))
                }
                #expect(
                    integrity == "[Dqlite.DqliteValue.text(\"ok\")]",
                    "ocr's integrity_check on node \(node): \(integrity)")
                ocrDumps[node] = dump
            }
            #expect(
                ocrDumps[1] == ocrDumps[2] && ocrDumps[2] == ocrDumps[3], "the nodes' copies of ocr's database differ")
            let dumpRows = dumps[1].map { $0.isEmpty ? 0 : $0.split(separator: "\n").count } ?? 0
            #expect(dumpRows == storedCount, "the dump has \(dumpRows) samples, the reads \(storedCount)")

            // The figures.
            let acks = operations.filter { $0.outcome == .ok }.map(\.ended).sorted()
            var longestGap = Duration.zero, gapEnd = origin
            for (previous, next) in zip(acks, acks.dropFirst()) where next - previous > longestGap {
                longestGap = next - previous
                gapEnd = next
            }
            func unavailable(after fault: ContinuousClock.Instant, notThrough node: Int) -> Duration? {
                operations.filter { $0.outcome == .ok && $0.started > fault && $0.node != node }.map(\.ended).min().map
                { $0 - fault }
            }
            let killGap = unavailable(after: faults.killedAt!, notThrough: faults.killedNode)
            let partitionGap = unavailable(after: faults.partitionedAt!, notThrough: faults.partitionedNode)
            let counts = (
                ok: operations.filter { $0.outcome == .ok }.count,
                failed: operations.filter { $0.outcome == .failed }.count,
                unknown: operations.filter { $0.outcome == .unknown }.count
            )
            func seconds(_ duration: Duration?) -> String {
                duration.map {
                    String(format: "%.2f s", Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18)
                } ?? "never"
            }
            print(
                """
                cluster fault test\(useTLS ? " over TLS" : ""), 3 nodes, \(Self.clients) health and \(Self.clients) ocr clients, health batches of \(Self.batch), over \(seconds(ContinuousClock.now - origin)):
                  health writes: \(operations.count) batches, \(counts.ok) acknowledged (\(acknowledgedUUIDs.count) samples), \(counts.failed) failed, \(counts.unknown) unknown; \
                \(storedCount) samples stored (\(storedCount - acknowledgedUUIDs.count) of the unacknowledged ones)
                  kill -9 of leader node \(faults.killedNode): first write acknowledged through another node after \(seconds(killGap))
                  partition of leader node \(faults.partitionedNode): first write acknowledged through another node after \(seconds(partitionGap)) (Raft had a new leader after \(seconds(elected))); \
                \(throughMinority.count) write(s) through it while cut off, none acknowledged
                  failover (longest gap between acknowledged writes): \(seconds(longestGap)), ending \(seconds(gapEnd - origin)) into the run
                  ocr: \(ocrOperations.count) records written, \(ocrAcknowledged.count) acknowledged, \(ocrOperations.filter { $0.outcome == .failed }.count) failed, \
                \(ocrOperations.filter { $0.outcome == .unknown }.count) unknown; \(ocrStored) stored; \
                first acknowledged after the kill \(seconds(ocrOperations.filter { $0.outcome == .ok && $0.started > faults.killedAt! && $0.node != faults.killedNode }.map(\.ended).min().map { $0 - faults.killedAt! })), \
                after the cut \(seconds(ocrOperations.filter { $0.outcome == .ok && $0.started > faults.partitionedAt! && $0.node != faults.partitionedNode }.map(\.ended).min().map { $0 - faults.partitionedAt! }))
                  first leader node \(firstLeader); every acknowledged sample on every node exactly once; integrity_check ok on each node
                """)
            #expect(counts.ok > 0)
            #expect(killGap != nil && partitionGap != nil, "writes never resumed after a fault")
            #expect(elected != nil, "the majority elected no leader while node \(faults.partitionedNode) was cut off")

            let down = try await compose("down")
            #expect(down.status == 0, "\(down.output)")
        }
    }

    /// Issue 38's harness: three writers, one per node, each pushing `AddSamples` with 3 s deadlines back to back; the
    /// leader's node is cut off. The issue asks for at most 4 s; a write is acknowledged through the majority within
    /// 2 s of the cut (`TestTime.scaled`): Raft's election (about half a second at 20 ms of latency), the statement's
    /// wait noticing it (`LeaderWatch`) and a leader search. Before, a statement on a replica waited out its whole
    /// call timeout (3 s) on the silent leader while its own node named the new one: 3.5 s here, 9–11 s in the issue.
    /// Health alone, on the default stack of nodes (the cluster over mutual TLS).
    @Test func aCutOffLeaderCostsTheMajorityItsElectionNotACallTimeout() async throws {
        let network = Nodes.freeNetwork()
        defer { Nodes.removeLeftovers(tag: network.tag) }
        try await Stack.with(services: ["health"]) { stack in
            func compose(_ arguments: String...) async throws -> (status: Int32, output: String) {
                try await stack.compose(environment: network.environment, arguments)
            }
            let up = try await compose("up", "--nodes", "3")
            try #require(up.status == 0, "compose up --nodes 3 failed: \(up.output)")
            let port = try #require(stack.basePorts["health"])
            let endpoints = (1...3).map { "\(network.subnet).\(10 + $0):\(port)" }
            let members = (1...3).map { "\(network.subnet).\(10 + $0):\(port + 1000)" }
            let cluster = try DqliteClient(
                addresses: members, database: "health", callTimeout: Self.clusterCallTimeout,
                leaderWait: Self.leaderWait, tls: try stack.operatorClusterTLS())
            let tokens = try await withClient(endpoints[0], tls: nil) { client in
                let admin = CallOptions(metadata: ["authorization": "Bearer \(Stack.adminToken)"])
                var tokens: [String] = []
                for index in 0..<3 {
                    tokens.append(try await client.createUser(.init(name: "writer\(index)"), options: admin).token)
                }
                return tokens
            }
            let run = Run()
            let writers = (0..<3).map { index in
                Task {
                    var sequence: Int64 = 0
                    while !run.stop.load(ordering: .relaxed) {
                        sequence += 1
                        var sample = HealthV1.Sample()
                        sample.uuid = UUID().uuidString.lowercased()
                        sample.type = "stepCount"
                        sample.value = Double(sequence)
                        sample.startMs = 1_767_225_600_000 + sequence * 60_000
                        sample.endMs = sample.startMs + 30_000
                        sample.source = "writer \(index)"
                        let operation = await Self.push(
                            [sample], through: endpoints[index], tls: nil, token: tokens[index], client: index,
                            node: index + 1)
                        run.history.withLock { $0.append(operation) }
                        try? await Task.sleep(for: .milliseconds(20))
                    }
                }
            }
            func acknowledged(after instant: ContinuousClock.Instant, notThrough node: Int) -> ContinuousClock.Instant?
            {
                run.history.withLock {
                    $0.filter { $0.outcome == .ok && $0.started > instant && $0.node != node }.map(\.ended).min()
                }
            }
            // Warm: every writer has had writes acknowledged (each node's sessions on the leader pooled).
            let warm = ContinuousClock.now
            while ContinuousClock.now - warm < TestTime.scaled(.seconds(30)),
                Set(run.history.withLock { $0.filter { $0.outcome == .ok }.map(\.node) }).count < 3
            {
                try await Task.sleep(for: .milliseconds(100))
            }
            try await Task.sleep(for: Self.phase(2))
            let leader = try #require(
                try await offPool { try cluster.leader() }.flatMap { members.firstIndex(of: $0.address) }.map { $0 + 1 }
            )
            let partition = try await compose("node", "partition", "\(leader)")
            #expect(partition.status == 0, "node partition: \(partition.output)")
            let cut = ContinuousClock.now
            while acknowledged(after: cut, notThrough: leader) == nil,
                ContinuousClock.now - cut < TestTime.scaled(.seconds(30))
            {
                try await Task.sleep(for: .milliseconds(50))
            }
            try await Task.sleep(for: Self.phase(1))
            #expect(try await compose("node", "heal").status == 0)
            run.stop.store(true, ordering: .relaxed)
            for writer in writers { await writer.value }

            let history = run.history.withLock { $0 }
            let firstAck = acknowledged(after: cut, notThrough: leader).map { $0 - cut }
            let acks = history.filter { $0.outcome == .ok }.map(\.ended).sorted()
            let lastAckBefore = acks.last { $0 < cut }
            let gap = zip(acks, acks.dropFirst()).map { $1 - $0 }.max() ?? .zero
            let majority = history.filter {
                $0.node != leader && $0.started > cut && ($0.ended - cut) <= (firstAck ?? TestTime.scaled(.seconds(30)))
            }
            func seconds(_ duration: Duration?) -> String {
                duration.map {
                    String(format: "%.2f s", Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18)
                } ?? "never"
            }
            print(
                """
                cut-off leader, 3 writers (AddSamples, \(seconds(Self.callTimeout)) deadlines), health on 3 nodes: node \(leader) cut off; first write \
                acknowledged through another node \(seconds(firstAck)) after the cut; no write acknowledged anywhere for \
                \(seconds(gap)) (the last before the cut \(seconds(lastAckBefore.map { cut - $0 })) before it); the majority's \
                writers meanwhile: \(majority.map { "\($0.outcome) after \(seconds($0.ended - $0.started))" }.prefix(12).joined(separator: ", ")); \
                \(history.filter { $0.outcome == .ok }.count) of \(history.count) writes acknowledged\
                \(Set(history.filter { $0.outcome != .ok }.map(\.detail)).prefix(3).map { "\n  " + $0 }.joined())
                """)
            let bound = TestTime.scaled(.seconds(2))
            #expect(
                firstAck.map { $0 <= bound } == true,
                "a write was acknowledged through the majority \(seconds(firstAck)) after the cut, over \(seconds(bound))"
            )
            #expect(try await compose("down").status == 0)
        }
    }

    /// A cluster port (the replica's port + 1000) past 65535 or on another service's port, or a latency that is not a
    /// number of milliseconds, is refused before anything is made.
    @Test func upRefusesClusterPortsAndLatenciesItCannotUse() async throws {
        let network = Nodes.freeNetwork()
        defer { Nodes.removeLeftovers(tag: network.tag) }
        try await Stack.with(services: ["health"]) { stack in
            try stack.writeConfig([ServiceSettings(name: "health", port: 65000, data: "data/health")])
            let port = try await stack.compose(environment: network.environment, ["up", "--nodes", "3"])
            #expect(
                port.status == 1
                    && port.output.contains("health.0's cluster port would be 66000 (its port + 1000), above 65535"),
                "\(port.output)")
            let latency = try await stack.compose(
                environment: network.environment.merging(["MENAGERIE_CLUSTER_LATENCY": "fast"]) { $1 },
                ["up", "--nodes", "3"])
            #expect(
                latency.status == 1
                    && latency.output.contains("MENAGERIE_CLUSTER_LATENCY must be a number of milliseconds"),
                "\(latency.output)")
            // ocr's cluster members would listen on health's service ports (CI once drew such ports for a stack: ocr
            // aborted on every node).
            try stack.writeConfig([
                ServiceSettings(name: "health", port: 23033, data: "data/health"),
                ServiceSettings(name: "ocr", port: 22032, replicas: 2, data: "data/ocr"),
            ])
            let collision = try await stack.compose(environment: network.environment, ["up", "--nodes", "3"])
            #expect(
                collision.status == 1
                    && collision.output.contains(
                        "ocr's cluster ports would be 23032-23033 (its ports + 1000), and health listens on 23033-23033"
                    ), "\(collision.output)")
            #expect(Nodes.namespaces(tag: network.tag).isEmpty)
        }
    }

    /// A client of one node only (no retries: each attempt is one recorded operation).
    func withClient<T: Sendable>(
        _ endpoint: String, tls: TLSCredentials?, _ body: (HealthV1.Health.Client) async throws -> T
    ) async throws -> T {
        let rpc = RPCClient(
            transports: [try TCPClientTransport(endpoint: endpoint, tls: tls)], retry: .init(maxAttempts: 1))
        defer { rpc.close() }
        return try await body(HealthV1.Health.Client(wrapping: rpc))
    }

    /// One AddSamples through `endpoint`: ok when every sample was added; failed when the service said nothing
    /// was written (UNAVAILABLE, or no connection); unknown otherwise (a timeout: it may have been written).
    static func push(
        _ samples: [HealthV1.Sample], through endpoint: String, tls: TLSCredentials?, token: String, client: Int,
        node: Int
    ) async -> Operation {
        let started = ContinuousClock.now
        var outcome = Operation.Outcome.unknown
        var detail = ""
        do {
            let rpc = RPCClient(
                transports: [try TCPClientTransport(endpoint: endpoint, tls: tls)], retry: .init(maxAttempts: 1))
            defer { rpc.close() }
            var request = HealthV1.AddSamplesRequest()
            request.samples = samples
            let response = try await HealthV1.Health.Client(wrapping: rpc).addSamples(
                request, options: CallOptions(timeout: callTimeout, metadata: ["authorization": "Bearer \(token)"]))
            outcome = response.summary?.added == Int64(samples.count) ? .ok : .unknown
            detail = "\(String(describing: response.summary))"
        } catch let error as RPCError {
            outcome = error.code == .unavailable ? .failed : .unknown
            detail = "\(error)"
        } catch {
            detail = "\(error)"
        }
        return Operation(
            service: "health", client: client, node: node, uuids: samples.map(\.uuid), started: started, ended: .now,
            outcome: outcome, detail: detail)
    }

    /// A template of one value, for the OCR clients' records.
    static func createTemplate(_ name: String, through endpoint: String, tls: TLSCredentials?) async throws {
        let rpc = RPCClient(
            transports: [try TCPClientTransport(endpoint: endpoint, tls: tls)], retry: .init(maxAttempts: 1))
        defer { rpc.close() }
        var value = OcrV1.ValueDefinition()
        value.name = "id"
        var box = OcrV1.NormalizedBox()
        (box.x, box.y, box.width, box.height) = (0.1, 0.1, 0.2, 0.1)
        value.region = box
        var request = OcrV1.CreateTemplateRequest()
        request.name = name
        request.values = [value]
        _ = try await OcrV1.OCR.Client(wrapping: rpc).createTemplate(
            request,
            options: CallOptions(
                timeout: TestTime.scaled(.seconds(20)), metadata: ["authorization": "Bearer \(Stack.adminToken)"]))
    }

    /// One AddRecord through `endpoint`, its one value `text`; outcomes as `push`'s.
    static func addRecord(
        _ text: String, to template: String, through endpoint: String, tls: TLSCredentials?, client: Int, node: Int
    ) async -> Operation {
        let started = ContinuousClock.now
        var outcome = Operation.Outcome.unknown
        var detail = ""
        do {
            let rpc = RPCClient(
                transports: [try TCPClientTransport(endpoint: endpoint, tls: tls)], retry: .init(maxAttempts: 1))
            defer { rpc.close() }
            var value = OcrV1.RecordValue()
            value.name = "id"
            value.text = text
            value.confidence = 1
            var request = OcrV1.AddRecordRequest()
            request.template = template
            request.values = [value]
            _ = try await OcrV1.OCR.Client(wrapping: rpc).addRecord(
                request,
                options: CallOptions(timeout: callTimeout, metadata: ["authorization": "Bearer \(Stack.adminToken)"]))
            outcome = .ok
        } catch let error as RPCError {
            outcome = error.code == .unavailable ? .failed : .unknown
            detail = "\(error)"
        } catch {
            detail = "\(error)"
        }
        return Operation(
            service: "ocr", client: client, node: node, uuids: [text], started: started, ended: .now, outcome: outcome,
            detail: detail)
    }

    /// The texts of every record of `template`, through `endpoint`, page by page (retried while the node catches up).
    static func recordTexts(of template: String, through endpoint: String, tls: TLSCredentials?) async throws
        -> [String]
    {
        var lastError: (any Error)?
        for _ in 0..<20 {
            do {
                let rpc = RPCClient(
                    transports: [try TCPClientTransport(endpoint: endpoint, tls: tls)], retry: .init(maxAttempts: 1))
                defer { rpc.close() }
                var texts: [String] = []
                var request = OcrV1.ListRecordsRequest()
                request.template = template
                request.pageSize = 1000
                repeat {
                    let page = try await OcrV1.OCR.Client(wrapping: rpc).listRecords(
                        request,
                        options: CallOptions(
                            timeout: readTimeout, metadata: ["authorization": "Bearer \(Stack.adminToken)"]))
                    texts += page.records.compactMap { $0.values.first?.text }
                    request.pageToken = page.nextPageToken
                } while !request.pageToken.isEmpty
                return texts
            } catch {
                lastError = error
                try await Task.sleep(for: retryPause)
            }
        }
        throw lastError!
    }

    /// Every sample of `token`'s user, through `endpoint` (retried while the node catches up after heal).
    static func readAll(through endpoint: String, tls: TLSCredentials?, token: String) async throws -> [HealthV1.Sample]
    {
        var lastError: (any Error)?
        for _ in 0..<20 {
            do {
                let rpc = RPCClient(
                    transports: [try TCPClientTransport(endpoint: endpoint, tls: tls)], retry: .init(maxAttempts: 1))
                defer { rpc.close() }
                var request = HealthV1.QuerySamplesRequest()
                request.limit = 10_000
                return try await HealthV1.Health.Client(wrapping: rpc).querySamples(
                    request, options: CallOptions(timeout: readTimeout, metadata: ["authorization": "Bearer \(token)"])
                ).samples
            } catch {
                lastError = error
                try await Task.sleep(for: retryPause)
            }
        }
        throw lastError!
    }
}

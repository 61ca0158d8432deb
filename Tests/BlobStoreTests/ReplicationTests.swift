import Base
import BlobStore
import BlobsAPI
import BlobsService
import Foundation
import Identity
import RPC
import TLS
import TestSupport
import Testing
import Transport
import WorkLane

/// Three replicas' blob stores in this process, each serving the Blobs rpcs over TCP behind the same guard as a
/// service's (admin only, the stack's admin token), each a `ReplicatedBlobs` of the other two.
final class BlobNodes: @unchecked Sendable {
    static let token = String(repeating: "t", count: 40)
    let scratch: [ScratchDirectory]
    let stores: [BlobStore]
    var servers: [TCPServer?]
    let addresses: [String]
    let lane = WorkLane(name: "blobs", threads: 2, queueLimit: 100)

    init(count: Int = 3, maxSize: Int = 64 << 20, budget: MemoryBudget = .process) throws {
        scratch = try (0..<count).map { _ in try ScratchDirectory() }
        stores = try scratch.map { try BlobStore(directory: $0.path, maxSize: maxSize) }
        let verifier = try TokenVerifier(store: nil, adminToken: Self.token)
        var servers: [TCPServer?] = []
        for store in stores {
            let guardian = IdentityGuard(verifier: verifier, throttle: FailedAuthThrottle())
            servers.append(
                try TCPServer(
                    rpc: RPCServer(
                        name: "blobs", services: [BlobsService(store: store, lane: lane, budget: budget)],
                        guard: guardian), port: 0))
        }
        self.servers = servers
        addresses = servers.map { $0!.address }
    }

    /// Node `index`'s replicated store: its disk, the others as peers.
    func node(_ index: Int, copies: Int = 2) throws -> ReplicatedBlobs {
        let others = addresses.indices.filter { $0 != index }.map { addresses[$0] }
        return ReplicatedBlobs(
            local: stores[index], peers: try ReplicatedBlobs.peers(addresses: others, token: Self.token),
            copies: copies,
            timeout: TestTime.scaled(.seconds(5)))
    }

    func client(_ index: Int, token: String?) throws -> BlobsV1.Blobs.Client {
        BlobsV1.Blobs.Client(
            wrapping: RPCClient(
                transports: [try TCPClientTransport(endpoint: addresses[index])], retry: .init(maxAttempts: 1),
                credentials: token.map { ["authorization": "Bearer \($0)"] } ?? [:]))
    }

    func stop(_ index: Int) async {
        await servers[index]?.shutdown(grace: .milliseconds(100))
        servers[index] = nil
    }

    func stopAll() async { for index in servers.indices { await stop(index) } }
}

@Suite struct BlobReplicationTests {
    /// Written through node 0, acknowledged on two nodes; node 0 gone, node 2 (which never had it) reads it from
    /// node 1, checks it and keeps it.
    @Test func aWriteIsOnTwoNodesAndReadThroughAnotherOnceItsWriterIsGone() async throws {
        let nodes = try BlobNodes()
        let bytes = randomBytes(3 << 20 | 12_345)  // several chunks, the last one short
        let hash = try await nodes.node(0).store(bytes)
        #expect(nodes.stores[0].has(hash))
        #expect(nodes.stores.filter { $0.has(hash) }.count == 2, "acknowledged once on two nodes, not before, not more")

        await nodes.stop(0)
        let holder = nodes.stores[1].has(hash) ? 1 : 2
        let reader = 3 - holder
        #expect(!nodes.stores[reader].has(hash))
        #expect(try await nodes.node(reader).fetch(hash) == bytes)
        #expect(nodes.stores[reader].has(hash), "a fetched blob is kept")
        await nodes.stopAll()
    }

    /// A copy damaged on this node's disk is never returned: it is fetched again from a peer.
    @Test func aDamagedLocalCopyIsFetchedAgain() async throws {
        let nodes = try BlobNodes()
        let bytes = randomBytes(100_000)
        let hash = try await nodes.node(0, copies: 3).store(bytes)
        #expect(nodes.stores.allSatisfy { $0.has(hash) }, "copies: 3 waits for every node")
        var damaged = bytes
        damaged[77] ^= 0xff
        try Data(damaged).write(to: URL(fileURLWithPath: nodes.stores[2].path(of: hash)))
        #expect(try await nodes.node(2).fetch(hash) == bytes)
        #expect(try nodes.stores[2].get(hash) == bytes, "the sound copy replaced the damaged one")
        await nodes.stopAll()
    }

    /// Without a second node to take it, a put is not acknowledged (UNAVAILABLE naming the peers' failures).
    @Test func aPutWithNoPeerUpIsNotAcknowledged() async throws {
        let nodes = try BlobNodes()
        await nodes.stop(1)
        await nodes.stop(2)
        await #expect { try await nodes.node(0).store(randomBytes(1000)) } throws: { error in
            (error as? BlobError)?.category == .unavailable
                && (error as? BlobError)?.message.contains("1 node(s) of the 2") == true
        }
        // A single replica (no peers) keeps its blobs alone.
        let alone = ReplicatedBlobs(local: nodes.stores[0], peers: [])
        let bytes = randomBytes(10)
        #expect(try await alone.fetch(try await alone.store(bytes)) == bytes)
        await nodes.stopAll()
    }

    /// A blob no node has is NOT_FOUND; one that only an unreachable node might have is UNAVAILABLE.
    @Test func aMissingBlobIsNotFoundOrUnavailable() async throws {
        let nodes = try BlobNodes()
        let missing = SHA256.hex([9, 9, 9])
        await #expect { _ = try await nodes.node(0).fetch(missing) } throws: {
            ($0 as? BlobError)?.category == .notFound
        }
        await nodes.stop(2)
        await #expect { _ = try await nodes.node(0).fetch(missing) } throws: {
            ($0 as? BlobError)?.category == .unavailable
        }
        await nodes.stopAll()
    }

    /// The Blobs rpcs are the replicas' own: an anonymous caller or a user's token writes and reads nothing.
    @Test func anonymousCallersAreRefused() async throws {
        let nodes = try BlobNodes()
        let anonymous = try nodes.client(0, token: nil)
        let bytes = randomBytes(10)
        await #expect {
            _ = try await anonymous.putBlob(options: CallOptions()) { writer in
                try await writer.send(BlobsV1.PutBlobRequest(hash: SHA256.hex(bytes), size: 10, data: bytes))
            }
        } throws: { ($0 as? RPCError)?.code == .unauthenticated }
        await #expect { _ = try await anonymous.hasBlobs(BlobsV1.HasBlobsRequest(hashes: [])) } throws: {
            ($0 as? RPCError)?.code == .unauthenticated
        }
        #expect(!nodes.stores[0].has(SHA256.hex(bytes)))
        await nodes.stopAll()
    }

    /// What a peer sends is checked: a hash that is no hash, bytes that hash otherwise, more bytes than the node
    /// takes, an unknown blob.
    @Test func aPeersInputIsValidated() async throws {
        let nodes = try BlobNodes(maxSize: 1 << 20)
        let peer = try nodes.client(0, token: BlobNodes.token)
        let bytes = randomBytes(1000)
        func put(_ request: BlobsV1.PutBlobRequest, _ more: [BlobsV1.PutBlobRequest] = []) async throws {
            _ = try await peer.putBlob(options: CallOptions()) { writer in
                try await writer.send(request)
                for message in more { try await writer.send(message) }
            }
        }
        await #expect { try await put(BlobsV1.PutBlobRequest(hash: "../x", size: 1000, data: bytes)) } throws: {
            ($0 as? RPCError)?.code == .invalidArgument
        }
        await #expect {
            try await put(BlobsV1.PutBlobRequest(hash: SHA256.hex([1]), size: 1000, data: bytes))
        } throws: {
            ($0 as? RPCError)?.code == .invalidArgument && ($0 as? RPCError)?.message.contains("hash to") == true
        }
        await #expect {
            try await put(BlobsV1.PutBlobRequest(hash: SHA256.hex(bytes), size: 999, data: bytes))
        } throws: {
            ($0 as? RPCError)?.code == .invalidArgument
        }
        await #expect {
            try await put(BlobsV1.PutBlobRequest(hash: SHA256.hex(bytes), size: 2 << 20, data: bytes))
        } throws: {
            ($0 as? RPCError)?.code == .resourceExhausted
        }
        await #expect {
            try await put(
                BlobsV1.PutBlobRequest(hash: SHA256.hex(bytes), size: 1000, data: Array(bytes[0..<10])),
                [BlobsV1.PutBlobRequest(hash: SHA256.hex([2]), data: Array(bytes[10...]))])
        } throws: { ($0 as? RPCError)?.code == .invalidArgument }
        #expect(!nodes.stores[0].has(SHA256.hex(bytes)))
        try await put(
            BlobsV1.PutBlobRequest(hash: SHA256.hex(bytes), size: 1000, data: Array(bytes[0..<10])),
            [BlobsV1.PutBlobRequest(data: Array(bytes[10...]))])
        #expect(try nodes.stores[0].get(SHA256.hex(bytes)) == bytes)

        await #expect {
            for try await _ in peer.getBlob(BlobsV1.GetBlobRequest(hash: SHA256.hex([3]))) {}
        } throws: { ($0 as? RPCError)?.code == .notFound }
        await #expect {
            for try await _ in peer.getBlob(BlobsV1.GetBlobRequest(hash: "nope")) {}
        } throws: { ($0 as? RPCError)?.code == .invalidArgument }
        await #expect {
            _ = try await peer.hasBlobs(BlobsV1.HasBlobsRequest(hashes: Array(repeating: SHA256.hex([1]), count: 1001)))
        } throws: { ($0 as? RPCError)?.code == .invalidArgument }
        #expect(
            try await peer.hasBlobs(BlobsV1.HasBlobsRequest(hashes: [SHA256.hex([4]), SHA256.hex(bytes)])).present == [
                SHA256.hex(bytes)
            ])
        await nodes.stopAll()
    }

    /// Over mutual TLS only the service's own certificate (its replicas') reaches the Blobs rpcs: the gateway's,
    /// admin token and all, is PERMISSION_DENIED; a replica with the service's certificate reads and writes.
    @Test func overTLSOnlyTheServicesCertificateIsAdmitted() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let replica = try certificates.issue("classification"), gateway = try certificates.issue("gateway")
        let credentials = try TLSCredentials.server(
            certificateFile: replica.certificate, keyFile: replica.key, caFile: certificates.caFile)
        let subject = try #require(credentials.context.certificate?.subject)
        let scratch = try ScratchDirectory()
        let store = try BlobStore(directory: scratch.path)
        let lane = WorkLane(name: "blobs", threads: 1, queueLimit: 10)
        let guardian = IdentityGuard(
            verifier: try TokenVerifier(store: nil, adminToken: BlobNodes.token), throttle: FailedAuthThrottle())
        let server = TCPServer(port: 0)
        server.serveTLS(credentials)
        try RPCServer(
            name: "blobs", services: [BlobsService(store: store, lane: lane, replicaCertificate: subject)],
            guard: guardian
        ).serve(over: server)
        func peers(_ pair: (certificate: String, key: String)) throws -> [ReplicatedBlobs.Peer] {
            try ReplicatedBlobs.peers(
                addresses: [server.address], token: BlobNodes.token,
                tls: try .client(certificateFile: pair.certificate, keyFile: pair.key, caFile: certificates.caFile))
        }
        let otherScratch = try ScratchDirectory()
        let bytes = randomBytes(2000)
        let stranger = ReplicatedBlobs(local: try BlobStore(directory: otherScratch.path), peers: try peers(gateway))
        await #expect { try await stranger.store(bytes) } throws: { error in
            (error as? BlobError)?.message.contains("PERMISSION_DENIED") == true
                && (error as? BlobError)?.message.contains("CN=classification") == true
        }
        #expect(!store.has(SHA256.hex(bytes)))
        let sibling = ReplicatedBlobs(local: try BlobStore(directory: otherScratch.path), peers: try peers(replica))
        let hash = try await sibling.store(bytes)
        #expect(try store.get(hash) == bytes)
        await server.shutdown(grace: .milliseconds(100))
    }

    /// A node's disk lost: the repair sends the blobs it held to another node, so they are on two again; with the
    /// other peer down as well, it says how many stay short.
    @Test func aLostCopyIsSentAgainByTheRepair() async throws {
        let nodes = try BlobNodes()
        let node0 = try nodes.node(0)
        let blobs = (0..<5).map { _ in randomBytes(3000) }
        var hashes: [String] = []
        for bytes in blobs { hashes.append(try await node0.store(bytes)) }
        #expect(await node0.repair(hashes) == (0, 0), "every blob is on two nodes already")
        // Node 1's and node 2's copies gone (a disk replaced): each blob is on node 0 only.
        for store in nodes.stores.dropFirst() {
            for hash in hashes { try? FileManager.default.removeItem(atPath: store.path(of: hash)) }
        }
        await nodes.stop(2)
        #expect(
            await node0.repair(hashes + [SHA256.hex([7])]) == (5, 0),
            "node 1 takes them; a hash node 0 lacks is not its to repair")
        #expect(hashes.allSatisfy(nodes.stores[1].has))
        for hash in hashes { try FileManager.default.removeItem(atPath: nodes.stores[1].path(of: hash)) }
        await nodes.stop(1)
        #expect(await node0.repair(hashes) == (0, 5))
        await nodes.stopAll()
    }

    /// A blob is sent whole once the memory budget holds it: past it, GetBlob is RESOURCE_EXHAUSTED (after a wait).
    @Test func aBlobLargerThanTheBudgetIsNotSent() async throws {
        let nodes = try BlobNodes(budget: MemoryBudget(limit: 4000))
        let small = try nodes.stores[0].put(randomBytes(3000)), large = try nodes.stores[0].put(randomBytes(5000))
        let peer = try nodes.client(0, token: BlobNodes.token)
        var received = 0
        for try await chunk in peer.getBlob(BlobsV1.GetBlobRequest(hash: small)) { received += chunk.data.count }
        #expect(received == 3000)
        await #expect {
            for try await _ in peer.getBlob(BlobsV1.GetBlobRequest(hash: large)) {}
        } throws: { ($0 as? RPCError)?.code == .resourceExhausted }
        await nodes.stopAll()
    }

    /// A peer that answers a hash with other bytes (a bug, a liar): they are refused, never kept, and the next peer asked.
    @Test func aLyingPeersBytesAreNeverKept() async throws {
        struct Liar: BlobsV1.Blobs.ClientProtocol {
            func putBlob(
                options: CallOptions,
                requests: @escaping @Sendable (RequestWriter<BlobsV1.PutBlobRequest>) async throws -> Void
            ) async throws -> BlobsV1.PutBlobResponse { BlobsV1.PutBlobResponse() }
            func getBlob(_ request: BlobsV1.GetBlobRequest, options: CallOptions) -> any AsyncSequence<
                BlobsV1.BlobChunk, any Error
            > {
                AsyncThrowingStream { continuation in
                    continuation.yield(BlobsV1.BlobChunk(size: 3, data: [1, 2, 3]))
                    continuation.finish()
                }
            }
            func hasBlobs(_ request: BlobsV1.HasBlobsRequest, options: CallOptions) async throws
                -> BlobsV1.HasBlobsResponse
            {
                BlobsV1.HasBlobsResponse(present: request.hashes)
            }
        }
        let nodes = try BlobNodes()
        let bytes = randomBytes(5000)
        let hash = try nodes.stores[2].put(bytes)
        let liar = ReplicatedBlobs.Peer(name: "liar", client: Liar())
        let alone = ReplicatedBlobs(local: nodes.stores[0], peers: [liar])
        await #expect { _ = try await alone.fetch(hash) } throws: { error in
            (error as? BlobError)?.message.contains("liar: INVALID_ARGUMENT") == true
        }
        #expect(!nodes.stores[0].has(hash))
        let honest = try ReplicatedBlobs.peers(addresses: [nodes.addresses[2]], token: BlobNodes.token)
        #expect(try await ReplicatedBlobs(local: nodes.stores[0], peers: [liar] + honest).fetch(hash) == bytes)
        await nodes.stopAll()
    }

    /// A peer whose copy does not match its hash is not believed: its bytes are refused and the next peer asked.
    @Test func aPeersDamagedCopyIsRefused() async throws {
        let nodes = try BlobNodes()
        let bytes = randomBytes(5000)
        let hash = SHA256.hex(bytes)
        // Node 1 holds a damaged copy under the hash (its own get refuses it too), node 2 a sound one.
        try nodes.stores[2].put(bytes)
        try FileManager.default.createDirectory(
            atPath: nodes.stores[1].directory + "/" + hash.prefix(2), withIntermediateDirectories: true)
        try Data(bytes.reversed()).write(to: URL(fileURLWithPath: nodes.stores[1].path(of: hash)))
        #expect(try await nodes.node(0).fetch(hash) == bytes)
        #expect(try nodes.stores[0].get(hash) == bytes)
        await nodes.stopAll()
    }
}

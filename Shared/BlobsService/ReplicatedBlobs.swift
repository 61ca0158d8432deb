import Base
import BlobStore
import BlobsAPI
import Dispatch
import RPC
import Synchronization
import Transport

/// A service's blobs on this node's disk and its peers' (the other replicas of the same service, each serving
/// `BlobsService`): a put is acknowledged once the blob is on `copies` nodes (this one and enough peers; all of
/// them when there are fewer), and a get of a blob missing here, or damaged here, fetches it from a peer by hash,
/// checks it and keeps it. Large payloads so stay out of the replicated database (Raft), whose rows name them by
/// hash.
public final class ReplicatedBlobs: BlobStoring, Sendable {
    /// Another replica: a name for messages (its address) and a client of its Blobs service.
    public struct Peer: Sendable {
        public let name: String
        public let client: any BlobsV1.Blobs.ClientProtocol

        public init(name: String, client: any BlobsV1.Blobs.ClientProtocol) {
            self.name = name
            self.client = client
        }
    }

    public let local: BlobStore
    public let peers: [Peer]
    /// Nodes a put waits for, this one included.
    public let copies: Int
    /// How long one call to a peer may take.
    public let timeout: Duration
    private let logger: Logger?
    /// Where the next put starts among the peers, so the second copies spread over them.
    private let next = Atomic<Int>(0)

    public init(
        local: BlobStore, peers: [Peer], copies: Int = 2, timeout: Duration = .seconds(60), logger: Logger? = nil
    ) {
        self.local = local
        self.peers = peers
        self.copies = max(1, copies)
        self.timeout = timeout
        self.logger = logger
    }

    /// Peers at `addresses` (`host:port` of their RPC servers), reached over TCP (and TLS when `tls` is given),
    /// calling with `token` (the stack's admin token, which every replica holds: the Blobs rpcs need it).
    public static func peers(addresses: [String], token: String?, tls: TLSCredentials? = nil) throws -> [Peer] {
        try addresses.map { address in
            let client = RPCClient(
                transports: [try TCPClientTransport(endpoint: address, tls: tls)], retry: .init(maxAttempts: 2),
                credentials: token.map { ["authorization": "Bearer \($0)"] } ?? [:])
            return Peer(name: address, client: BlobsV1.Blobs.Client(wrapping: client))
        }
    }

    // MARK: Blocking (for the lane and job threads)

    @discardableResult
    public func put(_ bytes: [UInt8]) throws -> String {
        try Self.blocking { try await self.store(bytes) }
    }

    public func get(_ hash: String) throws -> [UInt8] {
        try Self.blocking { try await self.fetch(hash) }
    }

    /// Runs `work` on Swift's pool and waits for it on this thread (never call it from the pool itself).
    private static func blocking<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
        let outcome = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let result: Result<T, any Error>
            do { result = .success(try await work()) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }

    // MARK: Async

    /// Stores `bytes` here, then on peers until `copies` nodes hold them; UNAVAILABLE (naming each peer's failure)
    /// when too few peers answered. The copies already made stay: a blob is only ever its hash's bytes.
    @discardableResult
    public func store(_ bytes: [UInt8]) async throws -> String {
        let hash = try local.put(bytes)
        let needed = min(copies, 1 + peers.count) - 1
        guard needed > 0 else { return hash }
        let start = next.add(1, ordering: .relaxed).newValue
        var stored = 0
        var failures: [String] = []
        for offset in 0..<peers.count {
            let peer = peers[(start + offset) % peers.count]
            do {
                try await push(hash, bytes, to: peer)
                stored += 1
                if stored == needed { return hash }
            } catch {
                failures.append("\(peer.name): \(Self.describe(error))")
            }
        }
        let message =
            "blob \(hash) is on \(1 + stored) node(s) of the \(needed + 1) a write needs (\(failures.joined(separator: "; ")))"
        logger?.warning(message)
        throw BlobError(.unavailable, message)
    }

    /// The blob of `hash`, from this node's disk, else from the first peer that has a sound copy (kept here
    /// afterwards). NOT_FOUND when every peer answered without it; UNAVAILABLE when some could not be asked.
    public func fetch(_ hash: String) async throws -> [UInt8] {
        try BlobStore.checkHash(hash)
        let reason: String
        do {
            return try local.get(hash)
        } catch let error as BlobError where error.category == .notFound || error.category == .dataLoss {
            if error.category == .dataLoss { logger?.error(error.message + "; fetching it from a peer") }
            reason = error.category == .notFound ? "not on this node" : "damaged on this node"
        }
        var failures: [String] = []
        var unreachable = false
        for peer in peers {
            do {
                try await pull(hash, from: peer)
                return try local.get(hash)
            } catch {
                if (error as? RPCError)?.code != .notFound { unreachable = true }
                failures.append("\(peer.name): \(Self.describe(error))")
            }
        }
        let message =
            "blob \(hash) is \(reason)"
            + (peers.isEmpty ? " and this node has no peers" : ", nor on a peer (\(failures.joined(separator: "; ")))")
        throw BlobError(unreachable ? .unavailable : .notFound, message)
    }

    /// Brings each of `hashes` that this node holds back to `copies` nodes: asks every peer which it holds (a peer
    /// that cannot be asked holds none) and sends each blob held too rarely to peers that lack it. Returns the copies
    /// sent and the blobs still short of `copies` (every peer down, say). What a lost node held so gets a second copy
    /// again without waiting for someone to ask for it; every replica runs it over what it holds.
    public func repair(_ hashes: [String]) async -> (sent: Int, short: Int) {
        let held = hashes.filter(local.has)
        let needed = min(copies, 1 + peers.count)
        guard needed > 1, !held.isEmpty else { return (0, 0) }
        var holders = [Set<String>](repeating: [], count: peers.count)
        var reachable = [Bool](repeating: true, count: peers.count)
        for (index, peer) in peers.enumerated() {
            do {
                for start in stride(from: 0, to: held.count, by: BlobsService.maxHashesAsked) {
                    let batch = Array(held[start..<min(held.count, start + BlobsService.maxHashesAsked)])
                    let answer = try await peer.client.hasBlobs(
                        BlobsV1.HasBlobsRequest(hashes: batch), options: CallOptions(timeout: timeout))
                    holders[index].formUnion(answer.present)
                }
            } catch {
                reachable[index] = false
            }
        }
        var sent = 0, short = 0
        for hash in held {
            var count = 1 + holders.filter { $0.contains(hash) }.count
            guard count < needed else { continue }
            guard let bytes = try? local.get(hash) else { continue }  // damaged here: the next read fetches it
            for index in peers.indices where count < needed && reachable[index] && !holders[index].contains(hash) {
                do {
                    try await push(hash, bytes, to: peers[index])
                    count += 1
                    sent += 1
                } catch {
                    logger?.warning("blob \(hash): no copy sent to \(peers[index].name): \(Self.describe(error))")
                }
            }
            if count < needed { short += 1 }
        }
        if sent > 0 || short > 0 {
            logger?.info("blob repair: \(sent) copies sent, \(short) blob(s) still on fewer than \(needed) nodes")
        }
        return (sent, short)
    }

    /// Runs `repair` over `hashes()` (the blobs the service's rows name) every `interval`, until cancelled.
    public func repairer(every interval: Duration, hashes: @escaping @Sendable () async throws -> [String])
        -> any BackgroundService
    {
        Repairer(blobs: self, interval: interval, hashes: hashes)
    }

    private struct Repairer: BackgroundService {
        let blobs: ReplicatedBlobs
        let interval: Duration
        let hashes: @Sendable () async throws -> [String]
        var name: String { "blob repair" }

        func run() async throws {
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard !Task.isCancelled else { return }
                do {
                    _ = await blobs.repair(try await hashes())
                } catch {
                    blobs.logger?.warning("blob repair: cannot list the blobs to check: \(error)")
                }
            }
        }
    }

    private func push(_ hash: String, _ bytes: [UInt8], to peer: Peer) async throws {
        let options = CallOptions(timeout: timeout)
        let present = try await peer.client.hasBlobs(BlobsV1.HasBlobsRequest(hashes: [hash]), options: options)
        if present.present.contains(hash) { return }
        _ = try await peer.client.putBlob(options: options) { writer in
            var offset = 0
            repeat {
                let end = min(bytes.count, offset + BlobsService.chunkSize)
                let data = Array(bytes[offset..<end])
                try await writer.send(
                    offset == 0
                        ? BlobsV1.PutBlobRequest(hash: hash, size: UInt64(bytes.count), data: data)
                        : BlobsV1.PutBlobRequest(data: data))
                offset = end
            } while offset < bytes.count
        }
    }

    /// Receives a peer's copy into this node's store, checked against the hash (a peer's wrong bytes are
    /// refused as INVALID_ARGUMENT by the writer and never kept).
    private func pull(_ hash: String, from peer: Peer) async throws {
        var writer: BlobStore.Writer?
        for try await chunk in peer.client.getBlob(
            BlobsV1.GetBlobRequest(hash: hash), options: CallOptions(timeout: timeout))
        {
            if writer == nil { writer = try local.writer(expecting: hash, size: Int(clamping: chunk.size)) }
            guard chunk.data.count <= BlobsService.chunkSize else {
                throw BlobError(
                    .invalidArgument, "peer \(peer.name) sent a piece of blob \(hash) of \(chunk.data.count) bytes")
            }
            try writer!.append(chunk.data)
        }
        guard let writer else {
            throw BlobError(.invalidArgument, "peer \(peer.name) answered blob \(hash) with nothing")
        }
        try writer.commit()
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? RPCError { return "\(error.code) \(error.message)" }
        if let error = error as? any CategorizedError { return error.description }
        return "\(error)"
    }
}

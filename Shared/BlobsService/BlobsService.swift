import Base
import BlobStore
import BlobsAPI
import RPC
import WorkLane

/// The Blobs rpcs over this node's `BlobStore`, which every replica run with `--cluster` serves to the other
/// replicas of its service. Everything a peer sends is checked: the hash's form before it names a path, the size
/// announced against the store's limit, each piece against the frame-friendly chunk size, the whole against the
/// hash before it takes its name.
public struct BlobsService: BlobsV1.Blobs.ServiceProtocol {
    public let store: BlobStore
    /// Where disk work runs (reading and hashing a blob, the fsync of a commit), off Swift's cooperative pool.
    private let lane: WorkLane
    /// What a blob being sent takes while it is read and sent whole (the process's budget, `--memory-budget`).
    private let budget: MemoryBudget
    /// On a TLS stack, the subject of this replica's own certificate: a caller must present a certificate of the
    /// same subject (the service's, which the stack's CA gave every replica of it, and no other service nor the
    /// gateway), so only the replicas of this service read and write its blobs. Nil: the guard's admin token only.
    public let replicaCertificate: String?

    /// Pieces of a blob on the wire: far below the 16 MiB frame limit, large enough to be cheap.
    public static let chunkSize = 1 << 20
    /// The most hashes one HasBlobs asks about.
    public static let maxHashesAsked = 1000

    public init(store: BlobStore, lane: WorkLane, budget: MemoryBudget = .process, replicaCertificate: String? = nil) {
        self.store = store
        self.lane = lane
        self.budget = budget
        self.replicaCertificate = replicaCertificate
    }

    /// PERMISSION_DENIED unless the caller presented this service's certificate (when one is required).
    private func admit(_ context: ServerContext) throws {
        guard let replicaCertificate, context.peerCertificate != replicaCertificate else { return }
        throw BlobError(
            .permissionDenied,
            "\(context.method) is for the replicas of this service: it needs a client certificate of \(replicaCertificate) (got \(context.peerCertificate ?? "none"))"
        )
    }

    public func putBlob(requests: RequestStream<BlobsV1.PutBlobRequest>, context: ServerContext) async throws
        -> BlobsV1.PutBlobResponse
    {
        try admit(context)
        var messages = requests.makeAsyncIterator()
        guard let first = try await messages.next() else {
            throw RPCError(.invalidArgument, "PutBlob: no message (the first names the blob)")
        }
        let hash = first.hash
        try BlobStore.checkHash(hash)
        guard first.size <= UInt64(store.maxSize) else {
            throw BlobError(
                .resourceExhausted,
                "blob \(hash) of \(first.size) bytes is larger than this node takes (\(store.maxSize))")
        }
        if store.has(hash) {
            // Read to the end, so the sender's stream closes cleanly; nothing is written.
            while try await messages.next() != nil {}
            return BlobsV1.PutBlobResponse(alreadyPresent: true)
        }
        let writer = try store.writer(expecting: hash, size: Int(first.size))
        var message: BlobsV1.PutBlobRequest? = first
        while let piece = message {
            guard piece.data.count <= Self.chunkSize else {
                throw BlobError(
                    .invalidArgument, "blob \(hash): a piece of \(piece.data.count) bytes (at most \(Self.chunkSize))")
            }
            guard piece.hash.isEmpty || piece.hash == hash, piece.size == 0 || piece.size == first.size else {
                throw BlobError(.invalidArgument, "blob \(hash): a later piece names another blob")
            }
            try writer.append(piece.data)
            message = try await messages.next()
        }
        try await lane.run { try writer.commit() }
        return BlobsV1.PutBlobResponse(alreadyPresent: false)
    }

    public func getBlob(
        request: BlobsV1.GetBlobRequest, response: ResponseWriter<BlobsV1.BlobChunk>, context: ServerContext
    ) async throws {
        try admit(context)
        try BlobStore.checkHash(request.hash)
        let store = store, hash = request.hash
        // The blob is read whole (its hash is checked before a byte goes out), so it waits for room in the budget first.
        let held = MemoryReservation(budget)
        defer { held.releaseAll() }
        if let size = store.size(of: hash), !(await held.grow(by: size, waitingUpTo: .seconds(5))) {
            throw BlobError(
                .resourceExhausted, "the memory budget cannot hold blob \(hash) (\(size) bytes) now; retry later")
        }
        let bytes = try await lane.run { try store.get(hash) }
        var offset = 0
        repeat {
            let end = min(bytes.count, offset + Self.chunkSize)
            try await response.send(
                BlobsV1.BlobChunk(size: offset == 0 ? UInt64(bytes.count) : 0, data: Array(bytes[offset..<end])))
            offset = end
        } while offset < bytes.count
    }

    public func hasBlobs(request: BlobsV1.HasBlobsRequest, context: ServerContext) async throws
        -> BlobsV1.HasBlobsResponse
    {
        try admit(context)
        guard request.hashes.count <= Self.maxHashesAsked else {
            throw BlobError(
                .invalidArgument, "HasBlobs: \(request.hashes.count) hashes (at most \(Self.maxHashesAsked) a call)")
        }
        for hash in request.hashes { try BlobStore.checkHash(hash) }
        return BlobsV1.HasBlobsResponse(present: request.hashes.filter(store.has))
    }
}

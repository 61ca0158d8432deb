import Base
import Foundation
import OCRCore
import RPC
import TextRecognition

/// An image arriving as a client stream: its bytes gathered up to the upload limit, its header checked against the
/// pixel limit as soon as enough of it is there.
struct UploadCollector {
    /// Largest upload accepted, in bytes.
    let limit: Int
    /// The batch's limit when what is left of it, not the per-image limit, is `limit` (for the message).
    let batchLimit: Int?
    let decoder: ImageDecoder
    /// Bytes after which the header is checked (the first chunk usually holds it; a JPEG's size may come after
    /// its EXIF block).
    static let headerCheckBytes = 64 * 1024

    private(set) var data = Data()
    private var headerChecked = false
    /// What the bytes hold of the process's memory budget: given back when the last holder lets go (the
    /// scan answered, the client gone, a batch's job ended), so uploads in all stay inside the budget.
    let reservation: MemoryReservation
    /// How long a chunk waits for room in the budget before the upload is refused; meanwhile nothing more is
    /// read of the stream, so the client is held by flow control (backpressure before refusal).
    let patience: Duration

    init(
        limit: Int, decoder: ImageDecoder, batchLimit: Int? = nil, reservation: MemoryReservation = MemoryReservation(),
        patience: Duration = MemoryBudget.patience
    ) {
        self.limit = limit
        self.batchLimit = batchLimit
        self.decoder = decoder
        self.reservation = reservation
        self.patience = patience
    }

    /// Appends one chunk, once the memory budget has room for it. RESOURCE_EXHAUSTED once the upload passes the
    /// limit, its header announces more pixels than allowed, or the budget had no room within `patience`.
    mutating func append(_ chunk: [UInt8], file: String? = nil) async throws {
        guard !chunk.isEmpty else { return }
        guard chunk.count <= limit - data.count else {
            let prefix = file.map { "\($0): " } ?? ""
            if let batchLimit {
                throw RPCError(
                    .resourceExhausted,
                    "\(prefix)the batch's files together are larger than its limit of \(Self.describe(batchLimit)); send fewer files per batch")
            }
            throw RPCError(.resourceExhausted, "\(prefix)the image is larger than the upload limit of \(Self.describe(limit))")
        }
        guard await reservation.grow(by: chunk.count, waitingUpTo: patience) else {
            let budget = reservation.budget
            throw RPCError(
                .resourceExhausted,
                "the server's memory budget cannot hold this upload now (\(budget.used >> 20) of \(budget.limit >> 20) MiB held for "
                    + "clients' data, still after waiting \(patience)); retry later")
        }
        data.append(contentsOf: chunk)
        if !headerChecked, data.count >= Self.headerCheckBytes {
            try checkHeader()
        }
    }

    /// The bytes received; checks a header not yet checked (a small image).
    mutating func finish() throws -> Data {
        if !headerChecked { try checkHeader() }
        return data
    }

    private mutating func checkHeader() throws {
        headerChecked = true
        do { try decoder.checkHeader(prefix: data) } catch let error as ImageError { throw OCRError(error) }
    }

    static func describe(_ bytes: Int) -> String {
        bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }
}

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

    init(limit: Int, decoder: ImageDecoder, batchLimit: Int? = nil, reservation: MemoryReservation = MemoryReservation()) {
        self.limit = limit
        self.batchLimit = batchLimit
        self.decoder = decoder
        self.reservation = reservation
    }

    /// Appends one chunk. RESOURCE_EXHAUSTED once the upload passes the limit or its header announces more pixels
    /// than allowed.
    mutating func append(_ chunk: [UInt8], file: String? = nil) throws {
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
        guard reservation.grow(by: chunk.count) else {
            let budget = reservation.budget
            throw RPCError(
                .resourceExhausted,
                "the server's memory budget cannot hold this upload now (\(budget.used >> 20) of \(budget.limit >> 20) MiB held for "
                    + "clients' data); retry later")
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

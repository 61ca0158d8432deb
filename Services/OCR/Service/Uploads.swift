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
                    "\(prefix)the batch's files together are larger than its limit of \(Self.describe(batchLimit)); send fewer files per batch"
                )
            }
            throw RPCError(
                .resourceExhausted, "\(prefix)the image is larger than the upload limit of \(Self.describe(limit))")
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

/// What decoding and recognising one photo holds — its 32-bit page, the grey and binarised copies the recognizer
/// makes, and PP-OCR's and Tesseract's working memory, about `bytesPerPixel` a pixel of what its header announces —
/// drawn from the memory budget like its upload was: the lane's threads each reading a 60-megapixel photo held some
/// 360 MB apiece outside it. A photo that does not fit waits for room, then is refused RESOURCE_EXHAUSTED; one whose
/// header does not read holds nothing (the decoder's pixel limit still bounds it, and its decoding says what is wrong).
public enum DecodeHold {
    /// Measured: a 36-megapixel PNG of text raised a replica's peak RSS by 328 MB (9.1 bytes a pixel) where 6 were
    /// reserved (issue 40); 10 keeps the reservation above what the scan takes.
    public static let bytesPerPixel = 10
    /// A scan that held at least this much gives the allocator's free pages back afterwards (`Allocator`).
    static let returnAfter = 64 << 20

    /// The largest photo a memory budget of `budget` bytes lets one scan decode, in megapixels: what a replica
    /// accepts by default (`--max-megapixels`), so that a photo admitted by its header can also be held.
    public static func megapixels(fittingIn budget: Int) -> Double {
        Double(budget / bytesPerPixel) / 1_000_000
    }

    static func reserve(
        for data: Data, maxPixels: Int, budget: MemoryBudget = .process, patience: Duration = MemoryBudget.patience
    ) async throws -> MemoryReservation {
        let held = MemoryReservation(budget)
        guard let pixels = ImageDecoder.announcedPixels(prefix: data) else { return held }
        let bytes = min(pixels, maxPixels) * bytesPerPixel
        guard await held.grow(by: bytes, waitingUpTo: patience) else {
            throw RPCError(
                .resourceExhausted,
                "reading this photo of \(pixels / 1_000_000) megapixels needs about \(bytes >> 20) MiB and the server's memory budget "
                    + "(\(budget.limit >> 20) MiB, \(budget.used >> 20) held) had no room for it within \(patience); retry later"
            )
        }
        return held
    }
}

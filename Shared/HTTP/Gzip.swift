internal import CZlib

/// gzip (RFC 1952) through zlib, for `Content-Encoding: gzip` both ways. Inflating stops at a limit,
/// so a small body cannot make the server hold gigabytes (a "zip bomb").
public enum Gzip {
    public struct Failure: Error, Equatable, CustomStringConvertible, Sendable {
        /// Why inflating stopped: what a server answers differs (a malformed body is the client's mistake; one too
        /// large for the limit or for the memory left is a resource it may not have).
        public enum Kind: Sendable, Equatable {
            case malformed, overLimit, overBudget
        }

        public let kind: Kind
        public let reason: String
        public var description: String { reason }

        public init(_ kind: Kind = .malformed, reason: String) {
            self.kind = kind
            self.reason = reason
        }
    }

    /// `bytes` compressed as one gzip member.
    public static func compress(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8] {
        var stream = z_stream()
        // windowBits 15 + 16: a gzip header and trailer rather than zlib's.
        guard
            deflateInit2_(
                &stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else {
            preconditionFailure("zlib cannot start deflating")
        }
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, uLong(bytes.count)))
        var output = [UInt8](repeating: 0, count: bound)
        var mutableInput = bytes
        let produced = mutableInput.withUnsafeMutableBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                stream.next_in = input.baseAddress
                stream.avail_in = uInt(input.count)
                stream.next_out = out.baseAddress
                stream.avail_out = uInt(out.count)
                let result = deflate(&stream, Z_FINISH)
                precondition(result == Z_STREAM_END, "deflate into deflateBound's room did not finish (\(result))")
                return out.count - Int(stream.avail_out)
            }
        }
        output.removeSubrange(produced...)
        return output
    }

    /// The bytes of the gzip data `bytes` (members joined); throws when they are not gzip, are
    /// truncated, or inflate to more than `limit` bytes.
    ///
    /// `admit` is asked for each piece of output before it is kept (at most 64 KiB at a time): a server takes it from
    /// its memory budget, so that inflating holds no more than the budget grants, step by step, and stops as soon as it
    /// does not (`overBudget`). The caller counts what it granted, to give it back.
    public static func decompress(
        _ bytes: [UInt8], limit: Int, admit: (Int) -> Bool = { _ in true }
    ) throws(Failure) -> [UInt8] {
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            preconditionFailure("zlib cannot start inflating")
        }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var mutableInput = bytes
        let failure: Failure? = mutableInput.withUnsafeMutableBufferPointer { input -> Failure? in
            stream.next_in = input.baseAddress
            stream.avail_in = uInt(input.count)
            while true {
                let (result, produced) = chunk.withUnsafeMutableBufferPointer { out -> (Int32, Int) in
                    stream.next_out = out.baseAddress
                    stream.avail_out = uInt(out.count)
                    let result = inflate(&stream, Z_NO_FLUSH)
                    return (result, out.count - Int(stream.avail_out))
                }
                if output.count + produced > limit {
                    return Failure(.overLimit, reason: "the body inflates to more than \(limit) bytes")
                }
                if produced > 0, !admit(produced) {
                    return Failure(
                        .overBudget,
                        reason: "the memory budget cannot hold the body inflated past \(output.count) bytes now")
                }
                output.append(contentsOf: chunk[..<produced])
                switch result {
                case Z_STREAM_END:
                    // Another member may follow (gzip allows concatenation).
                    if stream.avail_in == 0 { return nil }
                    guard inflateReset(&stream) == Z_OK else { return Failure(reason: "malformed gzip data") }
                case Z_OK:
                    if stream.avail_in == 0, produced == 0 { return Failure(reason: "truncated gzip data") }
                case Z_BUF_ERROR:
                    if stream.avail_in == 0 { return Failure(reason: "truncated gzip data") }
                default:
                    return Failure(reason: "malformed gzip data")
                }
            }
        }
        if let failure { throw failure }
        return output
    }
}

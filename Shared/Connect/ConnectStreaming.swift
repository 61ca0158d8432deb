import Base
import HTTP
import RPC
import Schema

/// Connect's streaming calls over HTTP/1.1 (https://connectrpc.com/docs/protocol#streaming-rpcs):
/// `application/connect+json` or `+proto`, every message in an envelope — a flag byte and a 4-byte
/// big-endian length, our own framing's shape — in a chunked body both ways, and the call's outcome
/// in a last envelope flagged end-of-stream (0x02) whose JSON is `{}` or `{"error": …}`. The HTTP
/// status is 200 whatever the outcome, once the call was read.
extension ConnectProtocol {
    /// Envelope flags: the message is compressed with the stream's `Connect-Content-Encoding`; the
    /// envelope ends the stream (the server's last).
    package static let compressedFlag: UInt8 = 0x01
    package static let endStreamFlag: UInt8 = 0x02

    /// Whether `request` opens a streaming call: a POST of `application/connect+…` (its body is
    /// read as it comes, envelope by envelope, rather than joined first).
    package static func isStreaming(_ request: HTTPRequest) -> Bool {
        request.method == "POST" && mediaType(request.headers["content-type"]).hasPrefix("application/connect+")
    }

    /// The media type of a `Content-Type` value, lowercased, without parameters.
    package static func mediaType(_ value: String?) -> String {
        // Bytes, not Foundation's trimming (which went through NSString: 8.8 % of a small Connect call's CPU).
        guard var value else { return "" }
        return value.withUTF8 { bytes in
            var end = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.count
            var start = 0
            func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
            while start < end, isSpace(bytes[start]) { start += 1 }
            while end > start, isSpace(bytes[end - 1]) { end -= 1 }
            let type = UnsafeBufferPointer(rebasing: bytes[start..<end])
            guard type.contains(where: { $0 >= 0x41 && $0 <= 0x5A || $0 >= 0x80 }) else {
                return String(decoding: type, as: UTF8.self)
            }
            return String(decoding: type, as: UTF8.self).lowercased()
        }
    }

    /// A streaming call read from its request's head (its messages follow in the body).
    package struct StreamCall {
        var encoding: Encoding
        /// Request envelopes flagged compressed are gzip (`Connect-Content-Encoding: gzip`).
        var gzipRequests: Bool
        /// The client takes gzip-compressed response envelopes (`Connect-Accept-Encoding: gzip`).
        var gzipResponses: Bool
        var metadata: Metadata
        var deadline: ContinuousClock.Instant?
        /// The method's requests come as a stream (else exactly one envelope).
        var clientStreams: Bool
        var json: JSONTranscoder?

        init(_ request: HTTPRequest, method: (info: ProtoMethodInfo, json: JSONTranscoder?)?) throws(Refusal) {
            let type = mediaType(request.headers["content-type"])
            switch type {
            case "application/connect+json": encoding = .json
            case "application/connect+proto": encoding = .proto
            default:
                var response = HTTPResponse.text(
                    415, "Content-Type \(type) is not served: use application/connect+json or application/connect+proto"
                )
                response.headers.add("Accept-Post", "application/connect+json, application/connect+proto")
                throw .http(response)
            }
            let path = String(request.path)
            guard let method else {
                throw .rpc(RPCError(.unimplemented, "no method \(path) on this server"), encoding)
            }
            let info = method.info
            guard info.clientStreaming || info.serverStreaming else {
                throw .http(
                    .text(415, "\(info.path) is a unary method: call it with application/json or application/proto"))
            }
            if info.clientStreaming, info.serverStreaming {
                throw .rpc(
                    RPCError(
                        .unimplemented,
                        "\(info.path) is bidirectional, which Connect serves over HTTP/2 only; over HTTP/1.1 call it with the "
                            + "binary protocol (length-prefixed frames on this same port: the gateway, RPCClient or the Python client)"
                    ),
                    encoding)
            }
            clientStreams = info.clientStreaming
            if let version = request.headers["connect-protocol-version"], version != "1" {
                throw .rpc(
                    RPCError(
                        .invalidArgument, "Connect-Protocol-Version \(version) is not served; this server speaks 1"),
                    encoding)
            }
            switch request.headers["connect-content-encoding"]?.lowercased() {
            case nil, "identity": gzipRequests = false
            case "gzip": gzipRequests = true
            case let other?:
                throw .rpc(
                    RPCError(.unimplemented, "Connect-Content-Encoding \(other) is not served; gzip and identity are"),
                    encoding)
            }
            gzipResponses = Call.codings(request.headers.values("connect-accept-encoding")).contains("gzip")
            deadline = try Call.deadline(request.headers["connect-timeout-ms"], encoding)
            metadata = Call.metadata(request.headers)
            if encoding == .json, method.json == nil {
                throw .rpc(
                    RPCError(.unimplemented, "\(info.path) has no JSON mapping; use application/connect+proto"),
                    encoding)
            }
            json = method.json
        }

        /// One request envelope's message as the call's decoder takes it: its flag byte, then its payload as it came.
        /// Only the flags are read here (on the loop); inflating and JSON wait for the worker (`decoder`).
        func request(flags: UInt8, _ payload: [UInt8]) throws(RPCError) -> [UInt8] {
            guard flags & ~compressedFlag == 0 else {
                throw RPCError(
                    .invalidArgument,
                    "request envelope flags 0x\(String(flags, radix: 16)): a client sends only 0x00 or 0x01")
            }
            if flags & compressedFlag != 0, !gzipRequests {
                throw RPCError(.invalidArgument, "a compressed envelope without Connect-Content-Encoding")
            }
            return needsDecoding ? [flags] + payload : payload
        }

        /// Protobuf that may not be compressed is taken as it comes, without a copy.
        private var needsDecoding: Bool { encoding == .json || gzipRequests }

        /// Decodes the messages `request` made, on the call's worker (see `RequestDecoder`); nil when they need none.
        func decoder(maxMessageSize: Int, budget: MemoryBudget?) -> RequestDecoder? {
            guard needsDecoding else { return nil }
            return ConnectProtocol.decoder(encoding: encoding, maxMessageSize: maxMessageSize, budget: budget) {
                message throws(RPCError) in
                guard let flags = message.first else {
                    throw RPCError(.internalError, "a request envelope lost its flags")
                }
                return (flags & compressedFlag != 0 ? .gzip : .identity, Array(message.dropFirst()))
            }
        }
    }

    /// One envelope: `flags`, `payload`'s length (big-endian, 4 bytes), `payload`.
    package static func envelope(flags: UInt8, _ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        return [
            flags, UInt8(length >> 24), UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8),
            UInt8(truncatingIfNeeded: length),
        ]
            + payload
    }

    /// The end-of-stream message: `{}` for success, else the error and (empty) trailing metadata.
    package static func endOfStream(_ error: RPCError?) -> [UInt8] {
        guard let error else { return Array("{}".utf8) }
        let body = JSONValue.object([
            JSONMember(
                "error",
                .object([
                    JSONMember("code", .string(error.code.connectName)), JSONMember("message", .string(error.message)),
                ])),
            JSONMember("metadata", .object([])),
        ])
        return Array(body.serialized().utf8)
    }
}

extension ConnectProtocol.Encoding {
    package var streamContentType: String { self == .json ? "application/connect+json" : "application/connect+proto" }
}

/// Cuts a streamed request body into Connect envelopes. An envelope longer than `maxMessageSize`
/// is refused as soon as its length is read, and one of `MemoryBudget.largeFrame` or more only
/// when `admit` grants its length (the server's memory budget), as our frames are.
package struct ConnectEnvelopeReader {
    private var buffer: [UInt8] = []
    private var start = 0
    package let maxMessageSize: Int
    /// Asks for `bytes` of the memory budget before a large envelope is buffered; false refuses it.
    package var admit: (Int) -> Bool = { _ in true }
    /// Budget held for the large envelope being buffered, released when it is taken.
    private(set) var reserved = 0
    package var release: (Int) -> Void = { _ in }

    package init(maxMessageSize: Int) { self.maxMessageSize = maxMessageSize }

    /// Part of an envelope is buffered.
    package var hasPartialEnvelope: Bool { buffer.count > start }

    package mutating func append(_ bytes: [UInt8]) {
        if start > 0, start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer += bytes
    }

    /// The next whole envelope, nil while it is incomplete.
    package mutating func next() throws(RPCError) -> (flags: UInt8, payload: [UInt8])? {
        guard buffer.count - start >= 5 else { return nil }
        let length = buffer[start + 1..<start + 5].reduce(0) { $0 << 8 | Int($1) }
        guard length <= maxMessageSize else {
            throw RPCError(
                .resourceExhausted, "a request message of \(length) bytes exceeds the limit of \(maxMessageSize) bytes")
        }
        if length >= MemoryBudget.largeFrame, reserved == 0 {
            guard admit(length) else {
                throw RPCError(
                    .resourceExhausted,
                    "the server's memory budget cannot hold a request message of \(length) bytes now; retry later")
            }
            reserved = length
        }
        guard buffer.count - start - 5 >= length else { return nil }
        let flags = buffer[start]
        let payload = Array(buffer[start + 5..<start + 5 + length])
        start += 5 + length
        releaseReserved()
        return (flags, payload)
    }

    /// Drops what is buffered: the stream is nobody's any more.
    package mutating func discardAll() {
        buffer = []
        start = 0
        releaseReserved()
    }

    package mutating func releaseReserved() {
        if reserved > 0 { release(reserved) }
        reserved = 0
    }
}

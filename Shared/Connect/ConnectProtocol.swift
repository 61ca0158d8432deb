import Base
import Foundation
import HTTP
import RPC
import Schema

/// The rules of the Connect protocol (https://connectrpc.com/docs/protocol) that turn an HTTP
/// request into a call and a call's outcome into an HTTP response, apart from any connection.
package enum ConnectProtocol {
    /// How a call's messages travel.
    package enum Encoding: Sendable, Equatable {
        case json, proto

        var contentType: String { self == .json ? "application/json" : "application/proto" }
    }

    /// Answers smaller than this are not worth compressing.
    package static var compressionThreshold: Int { 1024 }

    /// How the headers of an HTTP request that failed before its call ended: an answer of the HTTP
    /// layer (405, 415) or a Connect error of the call (bad timeout, body that does not decode).
    package enum Refusal: Error {
        case http(HTTPResponse)
        case rpc(RPCError, Encoding)
    }

    /// How a request's body is compressed (`Content-Encoding`, or a streaming call's `Connect-Content-Encoding`).
    package enum Compression: Sendable, Equatable {
        case identity, gzip
    }

    /// A unary call read from its HTTP request's head and body, the body as it came: it is decoded (inflated, from
    /// JSON) on the call's worker once the guard admitted the call (`decoder`).
    package struct Call {
        var encoding: Encoding
        /// The body as the client sent it.
        var payload: [UInt8]
        var compression: Compression
        var metadata: Metadata
        var deadline: ContinuousClock.Instant?
        var acceptsGzip: Bool
        var isGET: Bool

        /// Reads `request`'s head as a call of `method` (nil: a method the server does not offer, which the
        /// server answers UNIMPLEMENTED); nothing of its body is read.
        init(_ request: HTTPRequest, method: (info: ProtoMethodInfo, json: JSONTranscoder?)?) throws(Refusal) {
            isGET = request.method == "GET"
            acceptsGzip = Self.codings(request.headers.values("accept-encoding")).contains("gzip")
            let body: [UInt8]
            let compression: String?
            if isGET {
                let query = ConnectProtocol.query(request.query ?? "")
                guard query["connect"] == "v1" else {
                    throw .http(.text(400, "a Connect GET needs connect=v1 in its query"))
                }
                guard let encodingName = query["encoding"] else {
                    throw .http(.text(400, "a Connect GET needs encoding= in its query"))
                }
                guard let encoding = Encoding(name: encodingName) else {
                    throw .http(.text(415, "encoding \(encodingName) is not served; use json or proto"))
                }
                self.encoding = encoding
                let message = query["message"] ?? ""
                if query["base64"] == "1" {
                    guard let decoded = ConnectProtocol.base64URL(message) else {
                        throw .rpc(RPCError(.invalidArgument, "message is not base64"), encoding)
                    }
                    body = decoded
                } else {
                    body = Array(message.utf8)
                }
                compression = query["compression"]
                if let info = method?.info, !info.sideEffectFree {
                    var response = HTTPResponse.text(405, "\(info.path) has side effects: call it with POST")
                    response.headers.add("Allow", "POST, OPTIONS")
                    throw .http(response)
                }
            } else {
                let type = ConnectProtocol.mediaType(request.headers["content-type"])
                switch type {
                case "application/json": encoding = .json
                case "application/proto": encoding = .proto
                default:
                    var response = HTTPResponse.text(
                        415,
                        "Content-Type \(type.isEmpty ? "(none)" : type) is not served: use application/json or application/proto"
                    )
                    response.headers.add("Accept-Post", "application/json, application/proto")
                    throw .http(response)
                }
                body = request.body
                compression = request.headers["content-encoding"]
            }
            if let info = method?.info, info.clientStreaming || info.serverStreaming {
                throw .http(
                    .text(
                        415,
                        "\(info.path) is a streaming method: call it with application/connect+json or application/connect+proto"
                    ))
            }
            if let version = request.headers["connect-protocol-version"], version != "1" {
                throw .rpc(
                    RPCError(
                        .invalidArgument, "Connect-Protocol-Version \(version) is not served; this server speaks 1"),
                    encoding)
            }
            switch compression?.lowercased() {
            case nil, "identity": self.compression = .identity
            case "gzip": self.compression = .gzip
            case let other?:
                throw .rpc(
                    RPCError(.unimplemented, "compression \(other) is not served; gzip and identity are"), encoding)
            }
            if encoding == .json, let method, method.json == nil {
                throw .rpc(
                    RPCError(.unimplemented, "\(method.info.path) has no JSON mapping; use application/proto"), encoding
                )
            }
            payload = body
            deadline = try Self.deadline(request.headers["connect-timeout-ms"], encoding)
            metadata = Self.metadata(request.headers)
        }

        /// Decodes this call's body on its worker: nil when it is protobuf as it came, which needs no decoding.
        func decoder(maxMessageSize: Int, budget: MemoryBudget?) -> RequestDecoder? {
            guard encoding == .json || compression != .identity else { return nil }
            return ConnectProtocol.decoder(encoding: encoding, maxMessageSize: maxMessageSize, budget: budget) { body in
                (compression, body)
            }
        }

        static func codings(_ values: [String]) -> [String] {
            values.flatMap { $0.split(separator: ",") }.map { ConnectProtocol.mediaType(String($0)) }
        }

        /// `Connect-Timeout-Ms`: at most 10 digits, as the protocol says.
        static func deadline(_ value: String?, _ encoding: Encoding) throws(Refusal) -> ContinuousClock.Instant? {
            do {
                return try ConnectProtocol.deadline(value)
            } catch {
                throw .rpc(error, encoding)
            }
        }

        /// Headers that are not HTTP's or Connect's own travel as the call's metadata (as gRPC's do),
        /// so `Authorization: Bearer …` reaches a handler as `authorization`.
        static func metadata(_ headers: HTTPHeaders) -> Metadata {
            var metadata = Metadata()
            for (name, value) in headers {
                let key = name.lowercased()
                if ConnectProtocol.protocolHeaders.contains(key) || key.hasPrefix("connect-")
                    || key.hasPrefix("access-control-")
                {
                    continue
                }
                metadata.add(key, value)
            }
            return metadata
        }
    }

    /// A decoder of requests in `encoding` (see `RequestDecoder`), run on the call's worker after the guard: `unwrap`
    /// says how one request is compressed and gives its bytes (a unary body is as its header says; a stream's
    /// envelope carries its flag). Inflating stops at the method's limit, and takes what it holds from the memory
    /// budget step by step, giving it back once decoded (the binary protocol's large frames hold theirs while read);
    /// a JSON request is then transcoded to the method's protobuf message.
    package static func decoder(
        encoding: Encoding, maxMessageSize: Int, budget: MemoryBudget?,
        unwrap: @escaping @Sendable ([UInt8]) throws(RPCError) -> (Compression, [UInt8])
    ) -> RequestDecoder {
        RequestDecoder { bytes, method throws(RPCError) in
            var (compression, message) = try unwrap(bytes)
            let limit = method.info.requestLimit(within: maxMessageSize)
            // What decoding holds beyond the body it was given, given back once the request is protobuf.
            var held = 0
            defer { if held > 0 { budget?.release(held) } }
            if compression == .gzip {
                message = try inflate(message, limit: limit, budget: budget, holding: &held)
            } else if message.count > limit {
                throw RPCError(
                    .resourceExhausted,
                    "the request of \(message.count) bytes is over \(method.info.path)'s limit of \(limit) bytes")
            }
            guard encoding == .json else { return message }
            guard let json = method.json else {
                throw RPCError(.unimplemented, "\(method.info.path) has no JSON mapping; use application/proto")
            }
            // Reading JSON copies the text once more (into a String); a large one's copy is budgeted as well.
            if message.count >= MemoryBudget.largeFrame, let budget {
                guard budget.reserve(message.count) else {
                    throw RPCError(
                        .resourceExhausted,
                        "the memory budget cannot hold the JSON of \(message.count) bytes being read now; retry later")
                }
                held += message.count
            }
            return try json.request(message)
        }
    }

    /// `bytes` inflated within `limit` and what `budget` grants, step by step; what it took is added to `held`, for
    /// the caller to give back once done with the bytes.
    package static func inflate(_ bytes: [UInt8], limit: Int, budget: MemoryBudget?, holding held: inout Int)
        throws(RPCError) -> [UInt8]
    {
        do {
            return try Gzip.decompress(bytes, limit: limit) { piece in
                guard let budget else { return true }
                guard budget.reserve(piece) else { return false }
                held += piece
                return true
            }
        } catch {
            switch error.kind {
            case .malformed: throw RPCError(.invalidArgument, "the gzip body does not decompress: \(error)")
            case .overLimit:
                throw RPCError(
                    .resourceExhausted,
                    "the request \(error.reason.replacingOccurrences(of: "the body ", with: "")), its method's limit")
            case .overBudget: throw RPCError(.resourceExhausted, "\(error.reason); retry later")
            }
        }
    }

    /// The deadline `Connect-Timeout-Ms: value` sets (1 to 10 digits, as the protocol says); nil without one. Plain
    /// HTTP routes take it the same way.
    package static func deadline(_ value: String?) throws(RPCError) -> ContinuousClock.Instant? {
        guard let value else { return nil }
        guard !value.isEmpty, value.utf8.count <= 10, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let ms = Int64(value)
        else {
            throw RPCError(.invalidArgument, "Connect-Timeout-Ms must be 1 to 10 digits, not \(value)")
        }
        return .now + .milliseconds(ms)
    }

    /// Headers HTTP and Connect use themselves, which are no call metadata.
    package static let protocolHeaders: Set<String> = [
        "host", "content-type", "content-length", "content-encoding", "accept-encoding", "accept", "connection",
        "transfer-encoding", "te", "keep-alive", "upgrade", "origin", "referer", "if-none-match", "cache-control",
        "pragma",
    ]

    /// A query string's parameters, percent-decoded (`+` as a space, as forms send it); the first of a repeated name wins.
    package static func query(_ text: Substring) -> [String: String] {
        var parameters: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecoded(parts[0]) else { continue }
            let value = parts.count > 1 ? percentDecoded(parts[1]) ?? "" : ""
            if parameters[name] == nil { parameters[name] = value }
        }
        return parameters
    }

    private static func percentDecoded(_ text: Substring) -> String? {
        String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    /// Base64 in the URL-safe alphabet, padded or not (what Connect's GET sends), or the standard one.
    package static func base64URL(_ text: String) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.utf8.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map { Array($0) }
    }

    /// Connect's error body, `{"code": "not_found", "message": "…"}`, with the status its code maps to
    /// (or `status`), always JSON whatever the request's encoding.
    package static func errorResponse(_ error: RPCError, status: Int? = nil) -> HTTPResponse {
        let body = JSONValue.object([
            JSONMember("code", .string(error.code.connectName)), JSONMember("message", .string(error.message)),
        ])
        return HTTPResponse(
            status: status ?? error.code.httpStatus, headers: ["Content-Type": "application/json"],
            body: Array(body.serialized().utf8))
    }

    /// The error body of a call whose answer could not be written (its response did not map to JSON).
    package static func errorResponse(failing error: any Error) -> HTTPResponse {
        let failure: RPCError = (error as? RPCError) ?? RPCError(.internalError, "internal error")
        return errorResponse(failure, status: nil)
    }

    // MARK: CORS

    /// Headers a browser may send on a call: Connect's and those that carry metadata.
    package static let allowedHeaders =
        "Content-Type, Content-Encoding, Accept-Encoding, Connect-Content-Encoding, Connect-Accept-Encoding, Connect-Protocol-Version, Connect-Timeout-Ms, Authorization, X-User-Agent"

    /// Lets a web app on any origin call (the services hold no cookies: credentials are bearer
    /// tokens in `Authorization`), so the origin is echoed and `Vary` says so.
    package static func addCORS(to headers: inout HTTPHeaders, origin: String?) {
        guard let origin else { return }
        headers.add("Access-Control-Allow-Origin", origin)
        headers.add(
            "Access-Control-Expose-Headers",
            "Content-Encoding, Connect-Content-Encoding, ETag, Grpc-Status, Grpc-Message")
        if headers["Vary"] == nil { headers.add("Vary", "Origin") }
    }

    /// The answer to a CORS preflight (`OPTIONS`): which methods and headers a call may use, for a day.
    package static func preflight(_ request: HTTPRequest) -> HTTPResponse {
        var response = HTTPResponse(status: 204)
        let origin = request.headers["origin"]
        addCORS(to: &response.headers, origin: origin)
        response.headers.add("Access-Control-Allow-Methods", "POST, GET, OPTIONS")
        response.headers.add(
            "Access-Control-Allow-Headers", request.headers["access-control-request-headers"] ?? allowedHeaders)
        response.headers.add("Access-Control-Max-Age", "86400")
        response.headers.add("Allow", "POST, GET, OPTIONS")
        return response
    }

    // MARK: Caching

    /// A strong validator of a GET's answer (`EntityTag.strong`, shared with the plain HTTP routes).
    package static func entityTag(_ body: [UInt8]) -> String { EntityTag.strong(body) }

    /// Whether `If-None-Match: header` matches `tag` (`EntityTag.matches`).
    package static func matches(_ header: String, _ tag: String) -> Bool { EntityTag.matches(header, tag) }
}

extension ConnectProtocol.Encoding {
    package init?(name: String) {
        switch name {
        case "json": self = .json
        case "proto": self = .proto
        default: return nil
        }
    }
}

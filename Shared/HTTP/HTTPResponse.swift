/// One HTTP/1.1 response: status, header fields and body, serialized with its `Content-Length`
/// (or as the head of a chunked body, see `head(chunked:)`).
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A plain-text response (errors of the HTTP layer itself, before any call).
    public static func text(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Array((text + "\n").utf8))
    }

    /// Status line, header fields and body, with `Content-Length` (no body for 204 and 304).
    public func serialized(closing: Bool) -> [UInt8] {
        var bytes = serializedHead(closing: closing)
        if hasBody { bytes += body }
        return bytes
    }

    /// The head `serialized` starts with (its Content-Length counting `body`), for writers that put the body after it
    /// themselves instead of joining both into a new array (a large cached body is then copied once, not twice).
    public func serializedHead(closing: Bool) -> [UInt8] {
        head(closing: closing, extra: hasBody ? ("Content-Length", String(body.count)) : nil)
    }

    /// Whether the response carries `body` (204 and 304 never do).
    public var hasBody: Bool { status != 204 && status != 304 }

    /// Status line and header fields of a response whose body follows in chunks (`Transfer-Encoding: chunked`).
    public func chunkedHead(closing: Bool) -> [UInt8] {
        head(closing: closing, extra: ("Transfer-Encoding", "chunked"))
    }

    /// Status line and header fields alone: of a body delimited by the close (HTTP/1.0's streams).
    public func headLines(closing: Bool) -> [UInt8] {
        head(closing: closing, extra: nil)
    }

    private func head(closing: Bool, extra: (String, String)?) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(Self.reasonPhrase(status))\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let (name, value) = extra { text += "\(name): \(value)\r\n" }
        if closing { text += "Connection: close\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// One chunk of a chunked body (an empty `bytes` is the last chunk).
    public static func chunk(_ bytes: [UInt8]) -> [UInt8] {
        Array((String(bytes.count, radix: 16) + "\r\n").utf8) + bytes + [13, 10]
    }

    /// The last chunk of a chunked body, without trailer fields.
    public static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 204: "No Content"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 411: "Length Required"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 499: "Client Closed Request"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }
}

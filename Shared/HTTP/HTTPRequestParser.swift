/// Cuts HTTP/1.1 requests (RFC 9112) out of a byte stream, strictly: whatever a lenient parser
/// would have to guess at (bare LF line ends, whitespace before a colon, folded lines, a body
/// length given twice or both ways, a method or field name with separators, control characters) is
/// an error, because a proxy in front of us might have guessed differently (request smuggling).
/// Limits bound what one client makes us hold: the head, its field count and the body.
///
/// Incremental: `append` what arrives, then take requests with `next()` until it returns nil (one
/// is incomplete); pipelined requests come out one by one in order. Once it threw, the stream is
/// beyond repair: the caller answers the error and closes.
public struct HTTPRequestParser: Sendable {
    public struct Limits: Sendable {
        /// Request line and header fields together (and a chunked body's trailer fields).
        public var maxHeadBytes = 16 << 10
        public var maxHeaderFields = 100
        /// Body bytes after joining chunks.
        public var maxBodyBytes = 64 << 20

        public init(maxHeadBytes: Int = 16 << 10, maxHeaderFields: Int = 100, maxBodyBytes: Int = 64 << 20) {
            self.maxHeadBytes = maxHeadBytes
            self.maxHeaderFields = maxHeaderFields
            self.maxBodyBytes = maxBodyBytes
        }
    }

    private enum State: Sendable {
        case head
        case body(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkEnd
        case trailers
    }

    public let limits: Limits
    private var buffer: [UInt8] = []
    /// Where unread bytes start in `buffer` (bytes before it are dropped now and then, not per request).
    private var start = 0
    private var state = State.head
    /// The request whose body is being read.
    private var pending: HTTPRequest?
    /// Where the search for the end of the head resumes, so a head arriving byte by byte is scanned once.
    private var scanned = 0
    /// Trailer fields of the chunked body being read.
    private var trailerFields = 0
    /// The body being read is handed out in parts (`nextBodyPart`) rather than joined.
    public private(set) var isStreamingBody = false

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Bytes received and not yet taken as part of a request.
    public var bufferedBytes: Int { buffer.count - start }

    /// Bytes of the body being joined that the parser will hold once the part announced so far
    /// (its `Content-Length`, or the chunks sized so far) arrived: what a server budgets for it.
    public var bodyBytesExpected: Int {
        guard let pending else { return 0 }
        switch state {
        case .body(let remaining), .chunkData(let remaining): return pending.body.count + remaining
        default: return pending.body.count
        }
    }

    /// Bytes of the body being read still to come, when its length is known (nil for a chunked body,
    /// or between requests).
    public var bodyBytesRemaining: Int? {
        guard case .body(let remaining) = state else { return nil }
        return remaining
    }

    /// Makes room for the whole body announced so far at once, once the server budgeted it: a body joined
    /// by doubling copies what it holds at each step, and the last copies of a 60 MiB body (32 MiB
    /// into fresh pages) held the event loop for tens of milliseconds.
    public mutating func reserveBodyCapacity() {
        let expected = bodyBytesExpected
        guard pending != nil, expected > pending!.body.capacity else { return }
        pending!.body.reserveCapacity(expected)
    }

    /// The head of the request whose body is still arriving (nil between requests and while a head is read): what a
    /// server reads to refuse a caller before it takes the body in.
    public var headAwaitingBody: HTTPRequest? { pending }

    /// Whether part of a request has arrived (its head or body unfinished).
    public var hasPartialRequest: Bool { pending != nil || bufferedBytes > 0 }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start > 0, start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
            scanned = 0
        }
        buffer.append(contentsOf: bytes)
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// The next complete request, or nil while it is incomplete; throws on a malformed one.
    /// A request for which `streamsBody` is true comes out as soon as its head is read, with an
    /// empty body: its body follows through `nextBodyPart` (bounded by its reader, not by
    /// `maxBodyBytes`), and `next` returns nil until that body ended.
    public mutating func next(streamingBodyOf streamsBody: (HTTPRequest) -> Bool = { _ in false })
        throws(HTTPParseError) -> HTTPRequest?
    {
        guard !isStreamingBody else { return nil }
        while true {
            switch state {
            case .head:
                guard let request = try readHead() else { return nil }
                let length = try bodyLength(of: request, streamed: streamsBody(request))
                if streamsBody(request) {
                    isStreamingBody = true
                    switch length {
                    case .chunked: state = .chunkSize
                    case .fixed(let count): state = .body(remaining: count)
                    }
                    scanned = start
                    return request
                }
                pending = request
                switch length {
                case .chunked: state = .chunkSize
                case .fixed(0): return finish()
                case .fixed(let count): state = .body(remaining: count)
                }
            case .body(let remaining):
                let taken = min(remaining, bufferedBytes)
                pending!.body.append(contentsOf: buffer[start..<start + taken])
                start += taken
                if taken < remaining {
                    state = .body(remaining: remaining - taken)
                    return nil
                }
                return finish()
            case .chunkSize:
                guard let line = try readLine(limit: 1024, what: "chunk size line") else { return nil }
                let sizeText = line.prefix { $0 != UInt8(ascii: ";") }
                guard !sizeText.isEmpty, sizeText.count <= 8, sizeText.allSatisfy(\.isHexDigit),
                    let size = Int(String(decoding: sizeText, as: UTF8.self), radix: 16)
                else { throw HTTPParseError(400, "malformed chunk size") }
                guard isStreamingBody || pending!.body.count + size <= limits.maxBodyBytes else {
                    throw HTTPParseError(413, "the body exceeds \(limits.maxBodyBytes) bytes")
                }
                state = size == 0 ? .trailers : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let taken = min(remaining, bufferedBytes)
                pending!.body.append(contentsOf: buffer[start..<start + taken])
                start += taken
                if taken < remaining {
                    state = .chunkData(remaining: remaining - taken)
                    return nil
                }
                state = .chunkEnd
            case .chunkEnd:
                guard bufferedBytes >= 2 else { return nil }
                guard buffer[start] == 13, buffer[start + 1] == 10 else {
                    throw HTTPParseError(400, "chunk data not followed by CRLF")
                }
                start += 2
                state = .chunkSize
            case .trailers:
                // Trailer fields are read for their syntax and dropped: nothing here needs them.
                guard let line = try readLine(limit: limits.maxHeadBytes, what: "trailer field") else { return nil }
                if line.isEmpty { return finish() }
                _ = try Self.field(line)
                trailerFields += 1
                guard trailerFields <= limits.maxHeaderFields else {
                    throw HTTPParseError(431, "more than \(limits.maxHeaderFields) trailer fields")
                }
            }
        }
    }

    /// What `nextBodyPart` hands out of a streamed body.
    public enum BodyPart: Sendable, Equatable {
        /// The next bytes of the body (chunk framing removed), at most the size asked for.
        case bytes([UInt8])
        /// The body is over (its length read, or the last chunk and its trailer fields).
        case end
    }

    /// The next part of the streamed body of the request `next` returned last, of at most
    /// `maxBytes` (> 0); nil while nothing more has arrived. After `.end`, `next` reads requests again.
    public mutating func nextBodyPart(maxBytes: Int) throws(HTTPParseError) -> BodyPart? {
        guard isStreamingBody else { return nil }
        while true {
            switch state {
            case .head:
                return nil  // not reached: a streamed body ends in `endBody`
            case .body(let remaining), .chunkData(let remaining):
                let isChunk = if case .chunkData = state { true } else { false }
                if remaining == 0 {
                    if isChunk {
                        state = .chunkEnd
                        continue
                    }
                    return endBody()
                }
                let taken = min(remaining, bufferedBytes, maxBytes)
                guard taken > 0 else { return nil }
                let bytes = Array(buffer[start..<start + taken])
                start += taken
                state = isChunk ? .chunkData(remaining: remaining - taken) : .body(remaining: remaining - taken)
                return .bytes(bytes)
            case .chunkSize, .chunkEnd:
                // The chunk framing, read as `next` reads it.
                guard try readChunkFraming() else { return nil }
            case .trailers:
                guard let line = try readLine(limit: limits.maxHeadBytes, what: "trailer field") else { return nil }
                if line.isEmpty { return endBody() }
                _ = try Self.field(line)
                trailerFields += 1
                guard trailerFields <= limits.maxHeaderFields else {
                    throw HTTPParseError(431, "more than \(limits.maxHeaderFields) trailer fields")
                }
            }
        }
    }

    private mutating func endBody() -> BodyPart {
        isStreamingBody = false
        state = .head
        trailerFields = 0
        scanned = start
        return .end
    }

    /// Reads a chunk-size line or the CRLF after a chunk's data; false while it is incomplete.
    private mutating func readChunkFraming() throws(HTTPParseError) -> Bool {
        switch state {
        case .chunkSize:
            guard let line = try readLine(limit: 1024, what: "chunk size line") else { return false }
            let size = try Self.chunkSize(line)
            state = size == 0 ? .trailers : .chunkData(remaining: size)
        case .chunkEnd:
            guard bufferedBytes >= 2 else { return false }
            guard buffer[start] == 13, buffer[start + 1] == 10 else {
                throw HTTPParseError(400, "chunk data not followed by CRLF")
            }
            start += 2
            state = .chunkSize
        default: break
        }
        return true
    }

    private static func chunkSize(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> Int {
        let sizeText = line.prefix { $0 != UInt8(ascii: ";") }
        guard !sizeText.isEmpty, sizeText.count <= 8, sizeText.allSatisfy(\.isHexDigit),
            let size = Int(String(decoding: sizeText, as: UTF8.self), radix: 16)
        else { throw HTTPParseError(400, "malformed chunk size") }
        return size
    }

    private mutating func finish() -> HTTPRequest {
        state = .head
        trailerFields = 0
        scanned = start
        defer { pending = nil }
        return pending!
    }

    // MARK: The head

    private mutating func readLine(limit: Int, what: String) throws(HTTPParseError) -> ArraySlice<UInt8>? {
        var index = start
        while index < buffer.count {
            let byte = buffer[index]
            if byte == 10 { throw HTTPParseError(400, "bare LF in \(what)") }
            if byte == 13 {
                guard index + 1 < buffer.count else { return nil }
                guard buffer[index + 1] == 10 else { throw HTTPParseError(400, "CR without LF in \(what)") }
                let line = buffer[start..<index]
                start = index + 2
                return line
            }
            index += 1
            if index - start > limit { throw HTTPParseError(400, "\(what) longer than \(limit) bytes") }
        }
        return nil
    }

    private mutating func readHead() throws(HTTPParseError) -> HTTPRequest? {
        // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request line.
        while bufferedBytes >= 2, buffer[start] == 13, buffer[start + 1] == 10 {
            start += 2
            scanned = max(scanned, start)
        }
        // Find CRLF CRLF, checking every LF has its CR.
        var index = max(scanned, start)
        var end: Int?
        while index < buffer.count {
            let byte = buffer[index]
            if byte == 10 {
                guard index > start, buffer[index - 1] == 13 else {
                    throw HTTPParseError(400, "bare LF in the request head")
                }
                if index - start >= 3, buffer[index - 2] == 10, buffer[index - 3] == 13 {
                    end = index + 1
                    break
                }
            }
            index += 1
            if index - start > limits.maxHeadBytes {
                throw HTTPParseError(431, "the request head exceeds \(limits.maxHeadBytes) bytes")
            }
        }
        guard let end else {
            scanned = max(start, buffer.count - 1)
            return nil
        }
        let head = buffer[start..<end - 4]
        start = end
        // Every LF has its CR (checked above); a CR without its LF would split a line where a lenient
        // parser would not, so it is malformed too.
        var lines: [ArraySlice<UInt8>] = []
        for (index, piece) in head.split(separator: 13, omittingEmptySubsequences: false).enumerated() {
            guard index == 0 || piece.first == 10 else {
                throw HTTPParseError(400, "CR without LF in the request head")
            }
            lines.append(index == 0 ? piece : piece.dropFirst())
        }
        let requestLine = lines.removeFirst()
        var request = try Self.requestLine(requestLine)
        guard lines.count <= limits.maxHeaderFields else {
            throw HTTPParseError(431, "more than \(limits.maxHeaderFields) header fields")
        }
        for line in lines {
            let (name, value) = try Self.field(line)
            request.headers.add(name, value)
        }
        if request.isHTTP11 {
            guard request.headers.values("host").count == 1 else {
                throw HTTPParseError(400, "an HTTP/1.1 request needs exactly one Host field")
            }
        }
        return request
    }

    private static func requestLine(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> HTTPRequest {
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw HTTPParseError(400, "malformed request line") }
        let (method, target, version) = (parts[0], parts[1], parts[2])
        guard !method.isEmpty, method.allSatisfy(\.isTokenCharacter) else {
            throw HTTPParseError(400, "malformed method")
        }
        guard !target.isEmpty, target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw HTTPParseError(400, "malformed request target")
        }
        let targetText = String(decoding: target, as: UTF8.self)
        let methodText = String(decoding: method, as: UTF8.self)
        guard targetText.hasPrefix("/") || (targetText == "*" && methodText == "OPTIONS") else {
            throw HTTPParseError(400, "the request target must be a path (origin form)")
        }
        let versionText = String(decoding: version, as: UTF8.self)
        let isHTTP11: Bool
        switch versionText {
        case "HTTP/1.1": isHTTP11 = true
        case "HTTP/1.0": isHTTP11 = false
        default:
            let shape =
                versionText.utf8.count == 8 && versionText.hasPrefix("HTTP/")
                && versionText.utf8.enumerated().allSatisfy { index, byte in
                    index < 5
                        || (index == 6
                            ? byte == UInt8(ascii: ".") : (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte))
                }
            throw shape
                ? HTTPParseError(505, "only HTTP/1.1 and HTTP/1.0 are served")
                : HTTPParseError(400, "malformed HTTP version")
        }
        return HTTPRequest(method: methodText, target: targetText, isHTTP11: isHTTP11)
    }

    private static func field(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> (String, String) {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
            throw HTTPParseError(
                400,
                line.first == 32 || line.first == 9
                    ? "folded header lines are not allowed" : "header line without a colon")
        }
        let name = line[line.startIndex..<colon]
        guard !name.isEmpty, name.allSatisfy(\.isTokenCharacter) else {
            throw HTTPParseError(400, "malformed header field name")
        }
        let value = line[(colon + 1)...]
        guard value.allSatisfy({ $0 == 9 || ($0 >= 0x20 && $0 != 0x7F) }) else {
            throw HTTPParseError(400, "control character in header field \(String(decoding: name, as: UTF8.self))")
        }
        return (
            String(decoding: name, as: UTF8.self),
            String(String(decoding: value, as: UTF8.self).trimmingASCIIWhitespace())
        )
    }

    private enum BodyLength {
        case fixed(Int)
        case chunked
    }

    private func bodyLength(of request: HTTPRequest, streamed: Bool) throws(HTTPParseError) -> BodyLength {
        let encodings = request.headers.values("transfer-encoding")
        let lengths = request.headers.values("content-length")
        if !encodings.isEmpty {
            guard lengths.isEmpty else { throw HTTPParseError(400, "both Content-Length and Transfer-Encoding") }
            guard request.isHTTP11 else { throw HTTPParseError(400, "Transfer-Encoding in an HTTP/1.0 request") }
            let codings = encodings.flatMap { $0.split(separator: ",") }.map {
                $0.trimmingASCIIWhitespace().lowercased()
            }
            guard codings == ["chunked"] else {
                throw HTTPParseError(501, "only the chunked transfer coding is supported")
            }
            return .chunked
        }
        guard let first = lengths.first else { return .fixed(0) }
        // Repeated (or comma-joined) values must agree (RFC 9112 §6.3), and be digits only.
        let values = lengths.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }.map {
            $0.trimmingASCIIWhitespace()
        }
        guard values.allSatisfy({ $0 == values[0] }) else {
            throw HTTPParseError(400, "conflicting Content-Length values")
        }
        let text = values.first ?? Substring(first)
        guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let length = Int(text)
        else {
            throw HTTPParseError(400, "malformed Content-Length")
        }
        guard streamed || length <= limits.maxBodyBytes else {
            throw HTTPParseError(413, "the body of \(length) bytes exceeds \(limits.maxBodyBytes) bytes")
        }
        return .fixed(length)
    }
}

extension UInt8 {
    /// RFC 9110's `tchar`: what a method or a field name is made of.
    var isTokenCharacter: Bool {
        switch self {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: Array("!#$%&'*+-.^_`|~".utf8).contains(self)
        }
    }

    var isHexDigit: Bool {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default: false
        }
    }
}

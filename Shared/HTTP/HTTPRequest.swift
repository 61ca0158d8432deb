/// One HTTP/1.x request as the parser read it: the request line, the header fields in their order
/// and the whole body (a chunked body already joined). Names compare case-insensitively, as RFC 9110 says.
public struct HTTPRequest: Sendable, Equatable {
    public var method: String
    /// The request target as sent: origin form (`/path?query`) or `*` (OPTIONS only).
    public var target: String
    /// HTTP/1.1 (true) or HTTP/1.0.
    public var isHTTP11: Bool
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(
        method: String, target: String, isHTTP11: Bool = true, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []
    ) {
        self.method = method
        self.target = target
        self.isHTTP11 = isHTTP11
        self.headers = headers
        self.body = body
    }

    /// The target's path, before any `?`.
    public var path: Substring { target.prefix { $0 != "?" } }

    /// The target's query, after the first `?` (nil without one).
    public var query: Substring? {
        guard let mark = target.firstIndex(of: "?") else { return nil }
        return target[target.index(after: mark)...]
    }

    /// Whether the connection stays open after the answer: HTTP/1.1 unless `Connection: close`,
    /// HTTP/1.0 only with `Connection: keep-alive`.
    public var keepsAlive: Bool {
        let tokens = headers.values("connection").flatMap { $0.split(separator: ",") }
            .map { $0.trimmingASCIIWhitespace().lowercased() }
        return isHTTP11 ? !tokens.contains("close") : tokens.contains("keep-alive")
    }
}

/// Header fields in the order they came, looked up by name case-insensitively.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}

    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { add(name, value) }
    }

    public mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

    /// Removes every field `name`.
    public mutating func remove(_ name: String) { fields.removeAll { Self.sameName($0.name, name) } }

    /// Replaces every field `name` with one of `value`.
    public mutating func set(_ name: String, _ value: String) {
        fields.removeAll { Self.sameName($0.name, name) }
        fields.append((name, value))
    }

    /// The values of every field `name`.
    public func values(_ name: String) -> [String] {
        fields.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    /// The first value of `name`.
    public subscript(_ name: String) -> String? { fields.first { Self.sameName($0.name, name) }?.value }

    /// Whether two field names are equal ignoring ASCII case (names are tokens: ASCII), compared byte by byte: a
    /// lookup per header a request makes, so no lowercased copies (they were 1.5 % of a small Connect call's CPU).
    static func sameName(_ left: String, _ right: String) -> Bool {
        var left = left
        var right = right
        return left.withUTF8 { a in
            right.withUTF8 { b in
                guard a.count == b.count else { return false }
                for index in 0..<a.count where a[index] != b[index] {
                    let x = a[index] | 0x20, y = b[index] | 0x20
                    guard x == y, x >= 0x61, x <= 0x7A else { return false }
                }
                return true
            }
        }
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }
}

/// A request the server cannot take, with the status to answer before closing the connection
/// (400 for anything malformed; 413, 431, 501 and 505 where RFC 9110/9112 name a better one).
public struct HTTPParseError: Error, Equatable, CustomStringConvertible, Sendable {
    public let status: Int
    public let reason: String

    public init(_ status: Int, _ reason: String) {
        self.status = status
        self.reason = reason
    }

    public var description: String { "\(status) \(HTTPResponse.reasonPhrase(status)): \(reason)" }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
    func trimmingASCIIWhitespace() -> Substring {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }
}

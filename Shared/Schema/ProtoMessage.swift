/// A protobuf message as a Swift value. Generated conformances encode and decode through protobuf-c.
public protocol ProtoMessage: Sendable, Equatable {
    /// Full protobuf name, e.g. "menagerie.zoo.v1.Animal".
    static var protoName: String { get }
    init()
    /// Decodes protobuf wire bytes through protobuf-c, reading them where they are. Throws
    /// `SchemaError` on malformed input.
    init(serializedBytes: UnsafeRawBufferPointer) throws
    /// Encodes through protobuf-c straight into memory the caller provides: `destination` gets the
    /// encoded size and calls `pack` with exactly that many writable bytes.
    /// A string holding a NUL is cut there (protobuf-c's strings are C strings): where the message may hold text
    /// from elsewhere, use `serialize(refusingNUL:)`.
    func serialize(into destination: (_ byteCount: Int, _ pack: (UnsafeMutableRawBufferPointer) -> Void) -> Void)
    /// `serialize(into:)`, refusing a message with a string that holds a NUL (a `SchemaError`, `destination` not
    /// called) rather than sending `a` for `a\0b`: what the server's answers and the client's requests use, so
    /// encoding never changes text silently, as decoding does not.
    func serialize(refusingNUL destination: (_ byteCount: Int, _ pack: (UnsafeMutableRawBufferPointer) -> Void) -> Void)
        throws(SchemaError)
}

extension ProtoMessage {
    /// Decodes protobuf wire bytes through protobuf-c. Throws `SchemaError` on malformed input.
    public init(serializedBytes bytes: [UInt8]) throws {
        self = try bytes.withUnsafeBytes { try Self(serializedBytes: $0) }
    }

    /// Encodes through protobuf-c.
    public func serializedBytes() -> [UInt8] {
        var bytes: [UInt8] = []
        serialize(into: { byteCount, pack in
            bytes = [UInt8](unsafeUninitializedCapacity: byteCount) { buffer, initialized in
                pack(UnsafeMutableRawBufferPointer(buffer))
                initialized = byteCount
            }
        })
        return bytes
    }

    /// Encodes through protobuf-c; throws a `SchemaError` rather than cut a string at a NUL inside it.
    public func serializedBytesRefusingNUL() throws(SchemaError) -> [UInt8] {
        var bytes: [UInt8] = []
        try serialize(refusingNUL: { byteCount, pack in
            bytes = [UInt8](unsafeUninitializedCapacity: byteCount) { buffer, initialized in
                pack(UnsafeMutableRawBufferPointer(buffer))
                initialized = byteCount
            }
        })
        return bytes
    }
}

/// A protobuf enum as a Swift enum; values the schema does not define survive as `.unrecognized(n)`.
public protocol ProtoEnum: Sendable, Hashable {
    var rawValue: Int32 { get }
    init(rawValue: Int32)
}

/// Bytes that are not a valid encoding of the expected message.
public struct SchemaError: Error, CustomStringConvertible, Equatable {
    /// Full protobuf name of the message being decoded.
    public let messageName: String
    /// Length of the rejected input.
    public let byteCount: Int
    /// Why, when more is known than that protobuf-c refused it.
    public var reason = "malformed or truncated protobuf"
    /// The message could not be encoded (`byteCount` is then 0), rather than decoded.
    public var encoding = false

    public init(
        messageName: String, byteCount: Int, reason: String = "malformed or truncated protobuf", encoding: Bool = false
    ) {
        self.messageName = messageName
        self.byteCount = byteCount
        self.reason = reason
        self.encoding = encoding
    }

    public var description: String {
        encoding
            ? "cannot encode \(messageName): \(reason)"
            : "cannot decode \(messageName) from \(byteCount) bytes: \(reason)"
    }
}

/// A method of a proto service, generated from the `.proto` `service` blocks.
public struct ProtoMethod<Request: ProtoMessage, Response: ProtoMessage>: Sendable {
    /// `/package.Service/Method`, e.g. "/menagerie.zoo.v1.Zoo/SearchAnimals".
    public let path: String
    /// Whether the client sends a stream of requests.
    public let clientStreaming: Bool
    /// Whether the server answers with a stream of responses.
    public let serverStreaming: Bool
    /// From `option idempotency_level = IDEMPOTENT | NO_SIDE_EFFECTS`: safe to retry.
    public let idempotent: Bool
    /// From `option idempotency_level = NO_SIDE_EFFECTS`: a read, which HTTP may call with GET and cache.
    public let sideEffectFree: Bool
    /// From `option (menagerie.rpc.v1.access)`: who may call it.
    public let access: MethodAccess
    /// From `option (menagerie.rpc.v1.max_request_bytes)`: the largest request the server takes; nil: its default.
    public let maxRequestBytes: Int?
    /// From `option (menagerie.rpc.v1.http_get)`: the plain HTTP GET routes bound to it (`/api/animals/{id}`).
    public let httpGet: [String]

    public init(
        path: String, clientStreaming: Bool = false, serverStreaming: Bool, idempotent: Bool,
        sideEffectFree: Bool = false,
        access: MethodAccess, maxRequestBytes: Int? = nil, httpGet: [String] = []
    ) {
        self.path = path
        self.clientStreaming = clientStreaming
        self.serverStreaming = serverStreaming
        self.idempotent = idempotent
        self.sideEffectFree = sideEffectFree
        self.access = access
        self.maxRequestBytes = maxRequestBytes
        self.httpGet = httpGet
    }

    /// The untyped description, for reflection.
    public var info: ProtoMethodInfo {
        ProtoMethodInfo(
            path: path, clientStreaming: clientStreaming, serverStreaming: serverStreaming, idempotent: idempotent,
            sideEffectFree: sideEffectFree, access: access, maxRequestBytes: maxRequestBytes, httpGet: httpGet,
            requestType: Request.protoName, responseType: Response.protoName)
    }
}

/// Who may call a method, as its proto says (`option (menagerie.rpc.v1.access)`, required on every rpc): the
/// server's guard admits calls by it, and a client can tell which calls need a token.
public enum MethodAccess: String, Sendable, Hashable, CaseIterable {
    /// Anyone, without a token (reading the zoo); a token sent along is ignored.
    case `public`
    /// Any user with a valid token (their own OCR templates, health samples).
    case user
    /// A user with the admin role, or the admin token (changing data every user shares).
    case admin

    /// Whether a call must carry `authorization: Bearer <token>` to be admitted.
    public var needsToken: Bool { self != .public }
}

/// Untyped description of one method, for reflection.
public struct ProtoMethodInfo: Sendable, Hashable {
    /// `/package.Service/Method`.
    public let path: String
    public let clientStreaming: Bool
    public let serverStreaming: Bool
    public let idempotent: Bool
    /// A read (`NO_SIDE_EFFECTS`): HTTP may call it with GET.
    public let sideEffectFree: Bool
    /// Who may call it (the proto's `access` option).
    public let access: MethodAccess
    /// The largest request the server takes, in bytes (the proto's `max_request_bytes`); nil: the server's default.
    public let maxRequestBytes: Int?
    /// The plain HTTP GET routes bound to it (the proto's `http_get`).
    public let httpGet: [String]
    /// Full protobuf names of the request and response messages.
    public let requestType: String
    public let responseType: String

    public init(
        path: String, clientStreaming: Bool = false, serverStreaming: Bool, idempotent: Bool,
        sideEffectFree: Bool = false,
        access: MethodAccess, maxRequestBytes: Int? = nil, httpGet: [String] = [], requestType: String,
        responseType: String
    ) {
        self.path = path
        self.clientStreaming = clientStreaming
        self.serverStreaming = serverStreaming
        self.idempotent = idempotent
        self.sideEffectFree = sideEffectFree
        self.access = access
        self.maxRequestBytes = maxRequestBytes
        self.httpGet = httpGet
        self.requestType = requestType
        self.responseType = responseType
    }
}

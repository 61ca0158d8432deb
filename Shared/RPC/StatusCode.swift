/// One of gRPC's 17 status codes, carried on every reply.
public struct StatusCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32

    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let ok = StatusCode(rawValue: 0)
    public static let cancelled = StatusCode(rawValue: 1)
    public static let unknown = StatusCode(rawValue: 2)
    public static let invalidArgument = StatusCode(rawValue: 3)
    public static let deadlineExceeded = StatusCode(rawValue: 4)
    public static let notFound = StatusCode(rawValue: 5)
    public static let alreadyExists = StatusCode(rawValue: 6)
    public static let permissionDenied = StatusCode(rawValue: 7)
    public static let resourceExhausted = StatusCode(rawValue: 8)
    public static let failedPrecondition = StatusCode(rawValue: 9)
    public static let aborted = StatusCode(rawValue: 10)
    public static let outOfRange = StatusCode(rawValue: 11)
    public static let unimplemented = StatusCode(rawValue: 12)
    public static let internalError = StatusCode(rawValue: 13)
    public static let unavailable = StatusCode(rawValue: 14)
    public static let dataLoss = StatusCode(rawValue: 15)
    public static let unauthenticated = StatusCode(rawValue: 16)

    /// All 17 codes in numeric order.
    public static let all: [StatusCode] = (0...16).map { StatusCode(rawValue: $0) }

    private static let names = [
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
        "UNAUTHENTICATED",
    ]

    /// gRPC's canonical name, e.g. `NOT_FOUND`; `CODE_42` for a code outside the 17.
    public var name: String {
        rawValue < Self.names.count ? Self.names[Int(rawValue)] : "CODE_\(rawValue)"
    }

    /// Parses a canonical name (`NOT_FOUND`, case-insensitive) or a number.
    public init?(name: String) {
        if let number = UInt32(name) {
            self.init(rawValue: number)
            return
        }
        guard let index = Self.names.firstIndex(of: name.uppercased()) else { return nil }
        self.init(rawValue: UInt32(index))
    }

    /// The exit status the gateway CLI uses for a call that ended with this code (0 for OK).
    public var exitCode: Int32 { Int32(min(rawValue, 100)) }

    public var description: String { name }

    /// The Connect protocol's name of the code, lower_snake_case (`not_found`, `canceled`): what the
    /// HTTP face's error bodies and the gateway's `--json` errors carry.
    public var connectName: String {
        switch self {
        case .cancelled: "canceled"  // Connect's spelling
        case .internalError: "internal"
        default: name.lowercased()
        }
    }

    /// The code Connect names `name` (`not_found`), nil for a name it does not have.
    public init?(connectName: String) {
        guard let code = Self.all.dropFirst().first(where: { $0.connectName == connectName }) else { return nil }
        self = code
    }

    /// The HTTP status of a Connect unary error with this code (the Connect protocol's table).
    public var httpStatus: Int {
        switch self {
        case .cancelled: 499
        case .invalidArgument, .failedPrecondition, .outOfRange: 400
        case .deadlineExceeded: 504
        case .notFound: 404
        case .alreadyExists, .aborted: 409
        case .permissionDenied: 403
        case .resourceExhausted: 429
        case .unimplemented: 501
        case .unavailable: 503
        case .unauthenticated: 401
        case .ok: 200
        default: 500  // unknown, internal, data loss
        }
    }
}

/// The outcome of a call: a code and a human-readable message.
public struct RPCError: Error, Hashable, Sendable, CustomStringConvertible {
    public var code: StatusCode
    public var message: String

    public init(_ code: StatusCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message.isEmpty ? code.name : "\(code.name): \(message)" }
}

import Schema

/// A group of methods a server offers, e.g. the zoo service or the built-in health service.
public protocol RPCService: Sendable {
    /// Registers this service's handlers.
    func register(in router: inout RPCRouter)
}

/// Maps method paths to handlers; typed registration decodes requests and encodes responses.
public struct RPCRouter: Sendable {
    /// Untyped handler: returns the unary response, or nil after streaming through the sink.
    typealias Handler = @Sendable ([UInt8], ServerContext, any ResponseSink) async throws -> [UInt8]?

    struct Route: Sendable {
        let info: ProtoMethodInfo
        let handler: Handler
    }

    private(set) var routes: [String: Route] = [:]

    public init() {}

    /// Registers a unary method.
    public mutating func unary<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) {
        add(method) { bytes, context, _ in
            let request = try Self.decode(Request.self, bytes, method.path)
            return try await handler(request, context).serializedBytes()
        }
    }

    /// Registers a server-streaming method.
    public mutating func serverStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (Request, ResponseWriter<Response>, ServerContext) async throws -> Void
    ) {
        add(method) { bytes, context, sink in
            let request = try Self.decode(Request.self, bytes, method.path)
            try await handler(request, ResponseWriter(sink: sink), context)
            return nil
        }
    }

    /// Every registered method, sorted by path.
    public var methods: [ProtoMethodInfo] { routes.values.map(\.info).sorted { $0.path < $1.path } }

    private mutating func add<Request, Response>(_ method: ProtoMethod<Request, Response>, _ handler: @escaping Handler) {
        precondition(routes[method.path] == nil, "method \(method.path) registered twice")
        routes[method.path] = Route(info: method.info, handler: handler)
    }

    private static func decode<Request: ProtoMessage>(_ type: Request.Type, _ bytes: [UInt8], _ path: String) throws -> Request {
        do {
            return try Request(serializedBytes: bytes)
        } catch {
            throw RPCError(.invalidArgument, "request to \(path) is not a valid \(Request.protoName): \(error)")
        }
    }
}

extension ProtoMethodInfo {
    /// The service part of the path: `menagerie.zoo.v1.Zoo` for `/menagerie.zoo.v1.Zoo/Search`.
    public var service: String {
        String(path.dropFirst().prefix { $0 != "/" })
    }
}

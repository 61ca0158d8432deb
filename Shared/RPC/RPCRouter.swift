import Schema

/// A group of methods a server offers, e.g. the zoo service or the built-in health service.
public protocol RPCService: Sendable {
    /// Registers this service's handlers.
    func register(in router: inout RPCRouter)
}

/// Maps method paths to handlers; typed registration decodes requests and encodes responses.
public struct RPCRouter: Sendable {
    /// Untyped handler of a method with a single request: returns the unary response, or nil
    /// after streaming through the sink.
    typealias Handler = @Sendable ([UInt8], ServerContext, any ResponseSink) async throws -> [UInt8]?
    /// Untyped handler of a method with a stream of requests (client or bidirectional streaming).
    typealias StreamingHandler = @Sendable (MessageInbox, ServerContext, any ResponseSink) async throws -> [UInt8]?

    /// How a method takes its requests.
    enum Body: Sendable {
        case single(Handler)
        case streaming(StreamingHandler)
    }

    struct Route: Sendable {
        let info: ProtoMethodInfo
        let body: Body
    }

    private(set) var routes: [String: Route] = [:]

    public init() {}

    /// Registers a unary method.
    public mutating func unary<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) {
        add(method, .single { bytes, context, _ in
            let request = try Self.decode(Request.self, bytes, method.path)
            return try await handler(request, context).serializedBytes()
        })
    }

    /// Registers a server-streaming method.
    public mutating func serverStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (Request, ResponseWriter<Response>, ServerContext) async throws -> Void
    ) {
        add(method, .single { bytes, context, sink in
            let request = try Self.decode(Request.self, bytes, method.path)
            try await handler(request, ResponseWriter(sink: sink), context)
            return nil
        })
    }

    /// Registers a client-streaming method: the handler reads the requests until the client
    /// half-closes (or answers earlier) and returns the one response.
    public mutating func clientStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (RequestStream<Request>, ServerContext) async throws -> Response
    ) {
        add(method, .streaming { inbox, context, _ in
            try await handler(RequestStream(inbox: inbox, method: method.path), context).serializedBytes()
        })
    }

    /// Registers a bidirectional-streaming method: the handler reads requests and writes
    /// responses in any order; the call ends (OK) when it returns.
    public mutating func bidirectionalStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (RequestStream<Request>, ResponseWriter<Response>, ServerContext) async throws -> Void
    ) {
        add(method, .streaming { inbox, context, sink in
            try await handler(RequestStream(inbox: inbox, method: method.path), ResponseWriter(sink: sink), context)
            return nil
        })
    }

    /// Every registered method, sorted by path.
    public var methods: [ProtoMethodInfo] { routes.values.map(\.info).sorted { $0.path < $1.path } }

    private mutating func add<Request, Response>(_ method: ProtoMethod<Request, Response>, _ body: Body) {
        precondition(routes[method.path] == nil, "method \(method.path) registered twice")
        routes[method.path] = Route(info: method.info, body: body)
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

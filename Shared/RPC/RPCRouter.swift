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
        /// The method's messages in protobuf's JSON mapping, for the HTTP face (every generated message has it).
        let json: JSONTranscoder?
    }

    private(set) var routes: [String: Route] = [:]

    public init() {}

    /// Registers a unary method.
    public mutating func unary<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) {
        add(
            method,
            .single { bytes, context, _ in
                let request = try Self.decode(Request.self, bytes, method.path)
                // A response whose text holds a NUL fails the call (INTERNAL, logged) rather than answer it cut short.
                return try await handler(request, context).serializedBytesRefusingNUL()
            })
    }

    /// Registers a server-streaming method.
    public mutating func serverStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (Request, ResponseWriter<Response>, ServerContext) async throws -> Void
    ) {
        add(
            method,
            .single { bytes, context, sink in
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
        add(
            method,
            .streaming { inbox, context, _ in
                try await handler(RequestStream(inbox: inbox, method: method.path), context)
                    .serializedBytesRefusingNUL()
            })
    }

    /// Registers a bidirectional-streaming method: the handler reads requests and writes
    /// responses in any order; the call ends (OK) when it returns.
    public mutating func bidirectionalStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler:
            @escaping @Sendable (RequestStream<Request>, ResponseWriter<Response>, ServerContext) async throws -> Void
    ) {
        add(
            method,
            .streaming { inbox, context, sink in
                try await handler(RequestStream(inbox: inbox, method: method.path), ResponseWriter(sink: sink), context)
                return nil
            })
    }

    /// Every registered method, sorted by path.
    public var methods: [ProtoMethodInfo] { routes.values.map(\.info).sorted { $0.path < $1.path } }

    private mutating func add<Request, Response>(_ method: ProtoMethod<Request, Response>, _ body: Body) {
        precondition(routes[method.path] == nil, "method \(method.path) registered twice")
        routes[method.path] = Route(info: method.info, body: body, json: JSONTranscoder(Request.self, Response.self))
    }

    private static func decode<Request: ProtoMessage>(_ type: Request.Type, _ bytes: [UInt8], _ path: String) throws
        -> Request
    {
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

/// Reads a method's requests from protobuf's JSON mapping and writes its responses in it, through the
/// generated JSON code of its messages, so the HTTP face (Connect's `application/json`) serves every
/// method without code per method. Nil for messages without the mapping.
package struct JSONTranscoder: Sendable {
    /// JSON text of a request → its protobuf bytes; a request that does not map is INVALID_ARGUMENT.
    package let request: @Sendable ([UInt8]) throws(RPCError) -> [UInt8]
    /// Protobuf bytes of a response → its JSON text.
    package let response: @Sendable ([UInt8]) throws(RPCError) -> [UInt8]

    init?<Request: ProtoMessage, Response: ProtoMessage>(_: Request.Type, _: Response.Type) {
        guard let requestType = Request.self as? any ProtoJSONMessage.Type,
            let responseType = Response.self as? any ProtoJSONMessage.Type
        else { return nil }
        request = { bytes throws(RPCError) in try Self.fromJSON(requestType, bytes) }
        response = { bytes throws(RPCError) in try Self.toJSON(responseType, bytes) }
    }

    /// Unknown fields are skipped, as connect-go and protobuf's JSON readers do for clients built
    /// against a newer schema.
    static let options = ProtoJSONOptions(ignoreUnknownFields: true)

    private static func fromJSON<Message: ProtoJSONMessage>(_: Message.Type, _ bytes: [UInt8]) throws(RPCError)
        -> [UInt8]
    {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw RPCError(.invalidArgument, "the request is not UTF-8 JSON")
        }
        do {
            return try Message(jsonString: text, options: options).serializedBytes()
        } catch {
            throw RPCError(.invalidArgument, "the request is not a valid \(Message.protoName) in JSON: \(error)")
        }
    }

    private static func toJSON<Message: ProtoJSONMessage>(_: Message.Type, _ bytes: [UInt8]) throws(RPCError) -> [UInt8]
    {
        do {
            return Array(try Message(serializedBytes: bytes).jsonString().utf8)
        } catch {
            throw RPCError(.internalError, "the response is not a valid \(Message.protoName): \(error)")
        }
    }
}

import Base
import HTTP
import RPC

/// One plain HTTP route's request on a worker, served as a call of its binding: the server's pipeline
/// (`RPCServer.serve(_:_:_:)`: deadline, guard, stats under the binding's name) runs the handler there until it
/// first waits (`Task.immediate`, as a call's does); a failure is answered in the routes' REST style by its
/// category (`HTTPRoutes.problem`, `StatusCode.restStatus`), and the response goes out in the connection's order.
/// A HEAD is answered with GET's head, its `Content-Length` included, and no body.
final class HTTPRouteJob<Stream: ByteStream>: WorkerJob, @unchecked Sendable {
    let route: HTTPRoutes.Route
    let bound: BoundRoute
    let request: HTTPRequest
    let stream: Stream
    let exchanges: ConnectExchanges
    let keepAlive: Bool
    let origin: String?
    let server: TCPServer

    var workerTime: WorkerTime? { bound.workerTime }

    init(
        route: HTTPRoutes.Route, bound: BoundRoute, request: HTTPRequest, stream: Stream, exchanges: ConnectExchanges, keepAlive: Bool,
        origin: String?, server: TCPServer
    ) {
        self.route = route
        self.bound = bound
        self.request = request
        self.stream = stream
        self.exchanges = exchanges
        self.keepAlive = keepAlive
        self.origin = origin
        self.server = server
    }

    func run() -> Bool {
        Task.immediate { [self] in
            var response: HTTPResponse
            let head: CallHead
            let handler: @Sendable (Caller?) async throws -> HTTPResponse
            switch Self.deadline(request.headers["connect-timeout-ms"]) {
            case .success(let deadline):
                head = CallHead(method: bound.guardedAs, metadata: Self.metadata(request.headers), deadline: deadline, peer: stream.peer)
                handler = { [route, request] _ in try await route.handler(request) }
            case .failure(let error):
                head = CallHead(method: bound.guardedAs, metadata: Self.metadata(request.headers), peer: stream.peer)
                handler = { _ in throw error }
            }
            switch await server.rpc.serve(bound, head, handler) {
            case .success(let answer): response = answer
            case .failure(let error): response = server.httpRoutes!.problem(error.code.restStatus, error.message)
            }
            ConnectProtocol.addCORS(to: &response.headers, origin: origin)
            if request.method == "HEAD" {
                stream.send(bytes: response.serializedHead(closing: !keepAlive))
            } else {
                stream.send(response, closing: !keepAlive)
            }
            server.inFlight.subtract(1, ordering: .releasing)
            exchanges.onAnswered?(keepAlive)
        }
        return true
    }

    /// The deadline a client may set as on a Connect call, `Connect-Timeout-Ms` (1 to 10 digits); nil without one.
    static func deadline(_ value: String?) -> Result<ContinuousClock.Instant?, RPCError> {
        guard let value else { return .success(nil) }
        guard !value.isEmpty, value.utf8.count <= 10, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let ms = Int64(value) else {
            return .failure(RPCError(.invalidArgument, "Connect-Timeout-Ms must be 1 to 10 digits, not \(value)"))
        }
        return .success(.now + .milliseconds(ms))
    }

    /// The request's headers that are not HTTP's own, as a call's metadata (`authorization` for the guard).
    static func metadata(_ headers: HTTPHeaders) -> Metadata {
        var metadata = Metadata()
        for (name, value) in headers {
            let key = name.lowercased()
            if ConnectProtocol.protocolHeaders.contains(key) || key.hasPrefix("connect-") || key.hasPrefix("access-control-") { continue }
            metadata.add(key, value)
        }
        return metadata
    }
}

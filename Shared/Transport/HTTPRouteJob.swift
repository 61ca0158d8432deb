import Base
import HTTP
import RPC
import TCP

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
            let metadata = ConnectProtocol.Call.metadata(request.headers)
            switch Result(catching: { () throws(RPCError) in try ConnectProtocol.deadline(request.headers["connect-timeout-ms"]) }) {
            case .success(let deadline):
                head = CallHead(method: bound.guardedAs, metadata: metadata, deadline: deadline, peer: stream.peer)
                handler = { [route, request] _ in try await route.handler(request) }
            case .failure(let error):
                head = CallHead(method: bound.guardedAs, metadata: metadata, peer: stream.peer)
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
}

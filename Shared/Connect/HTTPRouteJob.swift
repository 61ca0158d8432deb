import Base
import HTTP
import RPC
import ServerSeam
import TCP

/// One plain HTTP route's request on a worker, served as a call of its binding: the server's pipeline
/// (`RPCServer.serve(_:_:_:)`: deadline, guard, stats under the binding's name) runs the handler there until it
/// first waits (`Task.immediate`, as a call's does); a failure is answered in the routes' REST style by its
/// category (`HTTPRoutes.problem`, `StatusCode.restStatus`), and the response goes out in the connection's order.
/// A HEAD is answered with GET's head, its `Content-Length` included, and no body.
package final class HTTPRouteJob<Stream: ByteStream>: WorkerJob, @unchecked Sendable {
    package let route: HTTPRoutes.Route
    package let bound: BoundRoute
    package let request: HTTPRequest
    package let stream: Stream
    package let exchanges: ConnectExchanges
    package let keepAlive: Bool
    package let origin: String?
    /// The routes (for their REST-style problems) and the server whose pipeline runs the handler.
    package let routes: HTTPRoutes
    package let rpc: RPCServer
    /// Tells the connection's calls the job is over (it counted in flight).
    package let ended: @Sendable () -> Void

    package var workerTime: WorkerTime? { bound.workerTime }

    init(
        route: HTTPRoutes.Route, bound: BoundRoute, request: HTTPRequest, stream: Stream, exchanges: ConnectExchanges, keepAlive: Bool,
        origin: String?, routes: HTTPRoutes, rpc: RPCServer, ended: @escaping @Sendable () -> Void
    ) {
        self.route = route
        self.bound = bound
        self.request = request
        self.stream = stream
        self.exchanges = exchanges
        self.keepAlive = keepAlive
        self.origin = origin
        self.routes = routes
        self.rpc = rpc
        self.ended = ended
    }

    package func run() -> Bool {
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
            switch await rpc.serve(bound, head, handler) {
            case .success(let answer): response = answer
            case .failure(let error): response = routes.problem(error.code.restStatus, error.message)
            }
            ConnectProtocol.addCORS(to: &response.headers, origin: origin)
            if request.method == "HEAD" {
                stream.send(bytes: response.serializedHead(closing: !keepAlive))
            } else {
                stream.send(response, closing: !keepAlive)
            }
            ended()
            exchanges.onAnswered?(keepAlive)
        }
        return true
    }
}

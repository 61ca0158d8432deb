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
///
/// A route the server's `AnswerCache` covers keeps its successful answer for the data version it was made from, and
/// when the loop could not tell that version (a recheck was due) asks the cache again here, after the guard, before
/// running the handler: the handler runs only for an answer the cache does not hold.
package final class HTTPRouteJob<Stream: ByteStream>: WorkerJob, @unchecked Sendable {
    /// Where the route's answer is kept, and the data version the loop saw (nil: it must be checked here).
    package struct Kept: Sendable {
        let cache: AnswerCache
        let key: AnswerCache.Key
        let version: Int64?
    }

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
    package let kept: Kept?
    /// Tells the connection's calls the job is over (it counted in flight).
    package let ended: @Sendable () -> Void

    package var workerTime: WorkerTime? { bound.workerTime }

    init(
        route: HTTPRoutes.Route, bound: BoundRoute, request: HTTPRequest, stream: Stream, exchanges: ConnectExchanges,
        keepAlive: Bool,
        origin: String?, routes: HTTPRoutes, rpc: RPCServer, kept: Kept? = nil, ended: @escaping @Sendable () -> Void
    ) {
        self.kept = kept
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
            switch Result(catching: { () throws(RPCError) in
                try ConnectProtocol.deadline(request.headers["connect-timeout-ms"])
            }) {
            case .success(let deadline):
                head = CallHead(method: bound.guardedAs, metadata: metadata, deadline: deadline, peer: stream.peer)
                handler = { [route, request, kept, bound, rpc] _ in
                    guard let kept else { return try await route.handler(request) }
                    return try await Self.answer(route, request, kept, counting: bound, rpc)
                }
            case .failure(let error):
                head = CallHead(method: bound.guardedAs, metadata: metadata, peer: stream.peer)
                handler = { _ in throw error }
            }
            switch await rpc.serve(bound, head, handler) {
            case .success(let answer): response = Self.answer(answer, to: request)
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

    /// The route's answer from the cache, or from its handler (then kept): on the worker, after the guard.
    private static func answer(
        _ route: HTTPRoutes.Route, _ request: HTTPRequest, _ kept: Kept, counting bound: BoundRoute, _ rpc: RPCServer
    ) async throws -> HTTPResponse {
        var version = kept.version
        if version == nil {
            let (answer, checked) = kept.cache.lookupChecked(kept.key)
            if let answer {
                rpc.countKept(bound)
                return answer
            }
            version = checked
        }
        let answer = try await route.handler(request)
        if let version { kept.cache.keep(answer, for: kept.key, madeAt: version, checking: true) }
        return answer
    }

    /// A successful answer as `request` gets it: 304 when its `If-None-Match` holds the answer's tag (what a kept
    /// answer, made for another request, must still honour), else as it is.
    package static func answer(_ response: HTTPResponse, to request: HTTPRequest) -> HTTPResponse {
        guard response.status == 200, let tag = response.headers["etag"],
            let ifNoneMatch = request.headers["if-none-match"],
            EntityTag.matches(ifNoneMatch, tag)
        else { return response }
        var headers = response.headers
        headers.remove("Content-Encoding")
        return HTTPResponse(status: 304, headers: headers)
    }
}

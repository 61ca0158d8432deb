import HTTP
import RPC

/// What a server's HTTP side serves beside Connect calls, set before it listens: plain routes (each bound to the
/// name its guard and stats know it by) and the answers its Connect face keeps. Handed to each HTTP connection.
package struct HTTPFace {
    package var routes: HTTPRoutes?
    /// `routes`' bindings, by `HTTPRoutes.Route.id`.
    package var bindings: [BoundRoute] = []
    package var answerCache: AnswerCache?

    package init(routes: HTTPRoutes? = nil, bindings: [BoundRoute] = [], answerCache: AnswerCache? = nil) {
        self.routes = routes
        self.bindings = bindings
        self.answerCache = answerCache
    }
}

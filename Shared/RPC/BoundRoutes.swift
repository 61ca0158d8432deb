import Base
import Schema

/// A route of another face of the server (a REST route bound to a method, `HTTPBinding`) as the server serves it:
/// what its calls are guarded as, where they are counted and how long they hold a worker. Made once per route
/// (`RPCServer.bind`), so serving one costs no lookup.
package final class BoundRoute: Sendable {
    /// What the stats count its calls under (`GET /api/animals/{id}`).
    package let name: String
    /// The method the guard is asked about: the one the route binds (its access rule), else `name`.
    package let guardedAs: String
    /// What the guard admits calls by: the bound method's (its proto's access level), or for a route that binds no
    /// method a public read's.
    let method: ProtoMethodInfo
    let stats: MethodStats
    /// How long a call of this route holds a server worker, as measured.
    package let workerTime = WorkerTime()

    init(name: String, guardedAs: String, method: ProtoMethodInfo, stats: MethodStats) {
        self.name = name
        self.guardedAs = guardedAs
        self.method = method
        self.stats = stats
    }
}

extension RPCServer {
    /// The route `name`, guarded as method `guardedAs` (by its access level; a route binding no method of this server
    /// is a public read: the page, its files, downloads), counted under `name` in this server's stats.
    package func bind(_ name: String, guardedAs: String) -> BoundRoute {
        let method =
            method(guardedAs)?.info
            ?? ProtoMethodInfo(
                path: guardedAs, serverStreaming: false, idempotent: true, sideEffectFree: true, access: .public,
                requestType: "",
                responseType: "")
        return BoundRoute(name: name, guardedAs: guardedAs, method: method, stats: stats.counters(for: name))
    }

    /// Whether the server's guard admits a call of `route` with `head` (its metadata and peer): what a face asks before
    /// it answers the route itself from kept bytes (`AnswerCachePolicy`). A refused call runs as any other, to be
    /// refused, counted and logged by `serve`.
    package func admits(_ route: BoundRoute, _ head: CallHead) -> Bool {
        guard let callGuard else { return true }
        var head = head
        head.method = route.guardedAs
        do {
            _ = try callGuard.admit(head, to: route.method)
            return true
        } catch {
            return false
        }
    }

    /// Counts a call of `route` that its face answered OK itself from kept bytes, as `serve` would count it, and as kept.
    package func countKept(_ route: BoundRoute, since arrived: ContinuousClock.Instant) {
        route.stats.recordKept(duration: .now - arrived)
    }

    /// Counts as kept a call of `route` answered from kept bytes inside `serve` (which counts the call).
    package func countKept(_ route: BoundRoute) { route.stats.countKept() }

    /// Runs one call of a bound route through the pipeline every call takes: refused if its deadline passed,
    /// admitted by the server's guard (as `route.guardedAs`, with `head`'s metadata and peer), then `handler`
    /// with the caller, cut off DEADLINE_EXCEEDED when `head.deadline` passes first; its status counted under
    /// `route.name`. A failure comes back as the `RPCError` a call would answer (a categorized error's own status,
    /// INTERNAL with the details logged for anything else), for the face to render in its own style.
    package func serve<Answer: Sendable>(
        _ route: BoundRoute, _ head: CallHead, _ handler: @escaping @Sendable (Caller?) async throws -> Answer
    ) async -> Result<Answer, RPCError> {
        let arrived = ContinuousClock.now
        var head = head
        head.method = route.guardedAs
        let outcome: Result<Answer, RPCError>
        var logged = true
        if let deadline = head.deadline, deadline <= arrived {
            outcome = .failure(RPCError(.deadlineExceeded, "deadline passed before \(route.name) started"))
        } else {
            do throws(RPCError) {
                let caller = try callGuard?.admit(head, to: route.method)
                outcome = await Self.run(head, caller, handler).mapError { status(for: $0, head) }
            } catch {
                // The guard logs its refusals once per window; a flood of guesses is no flood of lines.
                outcome = .failure(error)
                logged = false
            }
        }
        switch outcome {
        case .success:
            route.stats.record(duration: .now - arrived, code: .ok)
        case .failure(let error):
            route.stats.record(duration: .now - arrived, code: error.code)
            if logged {
                logger.log(
                    error.code == .internalError ? .error : .info, "\(route.name) from \(head.peer) failed: \(error)")
            }
        }
        return outcome
    }

    /// `handler`, raced against `head`'s deadline when it has one (the loser is cancelled).
    private static func run<Answer: Sendable>(
        _ head: CallHead, _ caller: Caller?, _ handler: @escaping @Sendable (Caller?) async throws -> Answer
    ) async -> Result<Answer, any Error> {
        guard let deadline = head.deadline else {
            do { return .success(try await handler(caller)) } catch { return .failure(error) }
        }
        do {
            return try await withThrowingTaskGroup(of: Answer?.self) { group in
                group.addTask { try await handler(caller) }
                group.addTask {
                    try await Task.sleep(until: deadline, clock: .continuous)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let answer = first else {
                    throw RPCError(.deadlineExceeded, "deadline exceeded while serving \(head.method)")
                }
                return .success(answer)
            }
        } catch {
            return .failure(error)
        }
    }
}

extension StatusCode {
    /// The HTTP status of a REST route failing with this code: FastAPI's 422 for a request value that is wrong
    /// (INVALID_ARGUMENT, OUT_OF_RANGE: its validation errors), else the Connect protocol's table (404, 503, …).
    package var restStatus: Int {
        switch self {
        case .invalidArgument, .outOfRange: 422
        default: httpStatus
        }
    }
}

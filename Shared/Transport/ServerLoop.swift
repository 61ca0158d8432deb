import Base
import Foundation
import RPC
import ServerCore
import ServerSeam
import Synchronization
import TCP

/// One event loop of a `TCPServer` and the connections it serves: a connection lives on the loop it
/// was placed on until it closes, so everything that walks connections — the idle sweep, call
/// deadlines, the flush timer, shedding for the memory budget — is done here, per loop, on that
/// loop's thread, and needs no lock. What must hold over every loop (the connection limits, uploads
/// per client, the memory budget, calls in flight) is the server's, behind locks or atomics.
final class ServerLoop: @unchecked Sendable {
    let loop: EventLoop
    /// Its place in the server's loops (0: the acceptor's).
    let index: Int
    private unowned let server: TCPServer
    /// Connections served here (loop thread).
    var connections: [ObjectIdentifier: any ServerConnection] = [:]
    /// Connections counted against the limits that live here, from the moment the acceptor placed
    /// them: what it balances by. Readable from any thread.
    let load = Atomic<Int>(0)
    /// Refused connections waiting for their last status to be written; closed by the sweeper if
    /// their client does not read it (loop thread; only the acceptor's loop refuses).
    var refused: [TCPConnection] = []
    private var budgetCheckScheduled = false
    private var sweeper: LoopTimer?
    /// The calls of this loop's connections: their deadlines and flushes (the server core's).
    let calls: LoopCalls

    init(loop: EventLoop, index: Int, server: TCPServer) {
        self.loop = loop
        self.index = index
        self.server = server
        calls = LoopCalls(loop: loop, server: server.core)
    }

    private var limits: TCPServer.Limits { server.limits }
    private var logger: Logger { server.logger }
    private var budget: MemoryBudget { server.budget }

    /// Starts the timers (loop thread).
    func start() {
        loop.assertInLoop()
        let period = min(limits.frameTimeout, limits.idleTimeout) / 4
        sweeper = LoopTimer(loop: loop) { [weak self] in self?.sweep() }
        sweeper?.start(after: period, every: period)
        calls.start()
    }

    /// Stops the timers and forgets the deadlines (loop thread; shutting down).
    func stopTimers() {
        loop.assertInLoop()
        sweeper?.close()
        sweeper = nil
        calls.stop()
    }

    /// Serves `connection`, accepted and admitted (counted) already, here (loop thread).
    func serve(_ connection: TCPConnection) {
        loop.assertInLoop()
        connection.budget = budget
        let served = server.servesThrough?(server, connection) ?? server.serve(connection, over: connection)
        connections[ObjectIdentifier(served)] = served
        server.rpc.connectionOpened()
        connection.onClose = { [unowned self] reason in
            connections[ObjectIdentifier(served)] = nil
            server.release(served)
            server.rpc.connectionClosed()
            served.closed(reason: reason)
            let level: LogLevel = reason == "peer closed the connection" ? .debug : .info
            logger.log(level, "closed connection from \(served.socket.peer): \(reason)")
        }
        connection.onBudgetExceeded = { [unowned self] in budgetExceeded() }
        logger.debug("accepted connection from \(connection.peer)")
    }

    // MARK: Reclaiming a place for a newcomer

    /// The best connection here to close for a newcomer past a connection limit (from `host`, when
    /// given): an idle one, else a quiet one (see `TCPServer.accept`). Loop thread.
    func reclaimCandidate(from host: String?) -> ReclaimCandidate? {
        loop.assertInLoop()
        if let (served, called, quietSince) = longestIdle(from: host) {
            return ReclaimCandidate(
                loop: index, connection: ObjectIdentifier(served), kind: .idle(called: called, quietSince: quietSince))
        }
        if let (served, sentAt) = longestQuiet(from: host) {
            return ReclaimCandidate(
                loop: index, connection: ObjectIdentifier(served),
                kind: .quiet(sentAt: sentAt, footprint: served.socket.budgetFootprint))
        }
        return nil
    }

    /// Closes `candidate` to make room under `limit`; false when it is gone or closing already (loop thread).
    func reclaim(_ candidate: ReclaimCandidate, limit: String) -> Bool {
        loop.assertInLoop()
        guard let served = connections[candidate.connection], !served.isFailing, !served.socket.isClosed else {
            return false
        }
        switch candidate.kind {
        case .idle:
            logger.info("closing idle connection from \(served.socket.peer) to make room: \(limit) is reached")
            served.fail(.unavailable, "idle connection closed to make room: \(limit) is reached")
        case .quiet:
            // Every connection has a call open: the one that sent nothing for longest (an upload
            // left open, a client gone without closing) makes room, so a newcomer — a health check
            // above all — gets in while a crowd of open calls keeps its slots.
            let silent = ContinuousClock.now - (served.lastFrameAt ?? served.socket.openedAt)
            logger.info(
                "closing connection from \(served.socket.peer) with \(served.openCalls) calls open and nothing sent for \(Int(silent.seconds)) s to make room: \(limit) is reached"
            )
            served.fail(
                .unavailable,
                "connection closed to make room: \(limit) is reached and it had sent nothing for \(Int(silent.seconds)) s"
            )
        }
        return true
    }

    /// The connection (from `host`, when given) with no open call to reclaim: one that never started
    /// a call before any that did, then the one with the oldest last frame or answer. (A socket that
    /// only keeps its slot, with a CANCEL of an unused id, had a frame more recently than a client
    /// that calls every 50 ms may have had; it went first all the same.)
    private func longestIdle(from host: String?) -> (any ServerConnection, Bool, ContinuousClock.Instant)? {
        var best: (any ServerConnection, Bool, ContinuousClock.Instant)?
        for served in connections.values where served.openCalls == 0 && !served.isFailing {
            let connection = served.socket
            if let host, connection.peerHost != host { continue }
            let quietSince = max(
                served.lastFrameAt ?? connection.openedAt, connection.lastWriteAt ?? connection.openedAt)
            let called = served.hasMadeCalls
            if best.map({ ReclaimCandidate.idleFirst((called, quietSince), $0.1, $0.2) }) ?? true {
                best = (served, called, quietSince)
            }
        }
        return best
    }

    /// The connection (from `host`, when given) with calls open that has sent nothing for longest,
    /// at least `reclaimAfterQuiet`; the larger holder of the memory budget first among equals.
    private func longestQuiet(from host: String?) -> (any ServerConnection, ContinuousClock.Instant)? {
        let now = ContinuousClock.now
        var best: (any ServerConnection, ContinuousClock.Instant)?
        for served in connections.values where !served.isFailing {
            let connection = served.socket
            if let host, connection.peerHost != host { continue }
            let sentAt = served.lastFrameAt ?? connection.openedAt
            guard now - sentAt >= limits.reclaimAfterQuiet else { continue }
            if let (current, currentAt) = best {
                if sentAt > currentAt
                    || (sentAt == currentAt && connection.budgetFootprint <= current.socket.budgetFootprint)
                {
                    continue
                }
            }
            best = (served, sentAt)
        }
        return best
    }

    // MARK: The memory budget

    /// Answers took the memory budget past its limit: closes the connections holding the most until
    /// it is within it again (on the loop's next turn, as this is called from inside a write).
    private func budgetExceeded() {
        guard !budgetCheckScheduled else { return }
        budgetCheckScheduled = true
        loop.execute { [self] in
            budgetCheckScheduled = false
            enforceBudget(making: 0)
        }
    }

    /// A large frame was refused for want of budget: the connection holding the most of it is
    /// closed too when it holds at least as much as that frame wanted (the largest offender) —
    /// this loop's; when none here does, each other loop's largest that does.
    func shedLargest(atLeast bytes: Int, sparing spared: (any ServerConnection)?, askingOthers: Bool = true) {
        loop.assertInLoop()
        guard
            let largest = connections.values.filter({ $0 !== spared && !$0.socket.isClosed })
                .max(by: { $0.socket.budgetFootprint < $1.socket.budgetFootprint }),
            largest.socket.budgetFootprint >= bytes
        else {
            if askingOthers {
                server.onOtherLoops(than: self) { $0.shedLargest(atLeast: bytes, sparing: nil, askingOthers: false) }
            }
            return
        }
        shed(largest)
    }

    /// How long a connection told to go for the memory budget has to read its answers and that
    /// status before it is closed outright, should the budget still be exhausted.
    static let budgetGrace: Duration = .seconds(1)

    /// Whether `served` was told why it is closed more than `budgetGrace` ago.
    private func hadItsGrace(_ served: any ServerConnection) -> Bool {
        served.socket.closingSince.map { ContinuousClock.now - $0 > Self.budgetGrace } ?? false
    }

    /// Closes `served` for the memory budget: told RESOURCE_EXHAUSTED (call id 0, behind the answers
    /// already written to it) and closed once that is sent; closed at once when it was told already,
    /// over `budgetGrace` ago, and still holds its bytes (the client does not read).
    private func shed(_ served: any ServerConnection) {
        let held = served.socket.budgetFootprint
        if hadItsGrace(served) {
            logger.warning(
                "closing connection from \(served.socket.peer): it still holds \(held) bytes of the exhausted memory budget"
            )
            served.socket.close(
                reason: "memory budget exhausted and the client does not read (the connection held \(held) bytes)")
        } else if !served.isFailing {
            logger.warning(
                "closing connection from \(served.socket.peer): it holds \(held) bytes and the memory budget of \(budget.limit) bytes is exhausted"
            )
            served.fail(
                .resourceExhausted,
                "memory budget exhausted: this connection held \(held) bytes of unread answers and unfinished frames")
        }
    }

    /// Closes the connections holding the most of the budget until `room` more bytes fit in it
    /// (loop thread). Connections told why they are closed over `budgetGrace` ago and still not
    /// flushed go first and at once, as they had their chance; the rest, largest first, are told
    /// RESOURCE_EXHAUSTED and closed once that is sent — what they hold no longer counts then, as
    /// it only shrinks (nothing more is queued or read on them). This loop's connections only: when
    /// they cannot make the room, the other loops shed theirs the same way.
    func enforceBudget(making room: Int, askingOthers: Bool = true) {
        loop.assertInLoop()
        guard budget.used + room > budget.limit else { return }
        let holders = connections.values.filter { $0.socket.budgetFootprint > 0 }
            .sorted { $0.socket.budgetFootprint > $1.socket.budgetFootprint }
        for served in holders where hadItsGrace(served) && budget.used + room > budget.limit { shed(served) }
        // Bytes of closed connections are released once their cancelled writes report back.
        var leaving = holders.filter { $0.isFailing || $0.socket.isClosed }.reduce(0) { $0 + $1.socket.budgetFootprint }
        for served in holders
        where !served.isFailing && !served.socket.isClosed && budget.used - leaving + room > budget.limit {
            shed(served)
            leaving += served.socket.budgetFootprint
        }
        if askingOthers, budget.used - leaving + room > budget.limit {
            server.onOtherLoops(than: self) { $0.enforceBudget(making: room, askingOthers: false) }
        }
    }

    // MARK: Timers

    /// Closes connections that stalled mid-frame, never sent a frame, or sat idle too long (idle
    /// since the last request or answer, whichever came later).
    private func sweep() {
        loop.assertInLoop()
        let now = ContinuousClock.now
        refused.removeAll { connection in
            if connection.isClosed { return true }
            guard let since = connection.closingSince, now - since > limits.frameTimeout else { return false }
            connection.close(reason: "refused client did not read its status")
            return true
        }
        for served in Array(connections.values) {
            let connection = served.socket
            if let since = connection.closingSince {
                // Told why it is closed, but the client does not read: close without waiting more.
                if now - since > limits.frameTimeout {
                    connection.close(reason: "closing, and the client does not read")
                }
            } else if let since = served.partialFrameSince, now - since > limits.frameTimeout {
                served.fail(
                    .unavailable,
                    "stalled: frame still incomplete after \(limits.frameTimeout) (stalled or too slow client)")
            } else if served.lastFrameAt == nil, now - connection.openedAt > limits.frameTimeout {
                served.fail(.unavailable, "stalled: no frame within \(limits.frameTimeout) of connecting")
            } else if served.openCalls > 0 {
                served.endStalledUploads(now: now)
            }
            // Quiet: no call open (nor one whose answer is being queued), no answer queued for the next flush, and
            // neither a frame nor a write for the idle timeout.
            if connection.closingSince == nil, served.openCalls == 0, !connection.hasUnflushedBytes,
                now - max(served.lastFrameAt ?? connection.openedAt, connection.lastWriteAt ?? connection.openedAt)
                    > limits.idleTimeout
            {
                served.fail(.unavailable, "idle timeout: no call for \(limits.idleTimeout)")
            }
        }
    }
}

/// A connection one loop offers to close for a newcomer past a connection limit, with what ranks it
/// against the other loops' offers: the acceptor picks as one loop would among all of them.
struct ReclaimCandidate: Sendable {
    enum Kind: Sendable {
        /// No call open; `called`: it ever started one.
        case idle(called: Bool, quietSince: ContinuousClock.Instant)
        /// Calls open, and nothing sent since `sentAt` (at least `reclaimAfterQuiet` ago).
        case quiet(sentAt: ContinuousClock.Instant, footprint: Int)
    }

    let loop: Int
    let connection: ObjectIdentifier
    let kind: Kind

    /// Whether an idle connection (`called`, quiet since `quietSince`) goes before another: one that
    /// never called first, then the one quiet longest.
    static func idleFirst(
        _ candidate: (Bool, ContinuousClock.Instant), _ called: Bool, _ quietSince: ContinuousClock.Instant
    ) -> Bool {
        (!candidate.0 && called) || (candidate.0 == called && candidate.1 < quietSince)
    }

    /// Whether this goes before `other`: any idle connection before a quiet one, then as each loop ranks them.
    func goesBefore(_ other: ReclaimCandidate) -> Bool {
        switch (kind, other.kind) {
        case (.idle(let called, let since), .idle(let otherCalled, let otherSince)):
            return Self.idleFirst((called, since), otherCalled, otherSince)
        case (.idle, .quiet): return true
        case (.quiet, .idle): return false
        case (.quiet(let sentAt, let footprint), .quiet(let otherAt, let otherFootprint)):
            return sentAt < otherAt || (sentAt == otherAt && footprint > otherFootprint)
        }
    }
}

import Synchronization

/// Per-call flow control, as HTTP/2 does it for gRPC's streams (see `FrameKind` in rpc.proto): the
/// receiver of a call's messages grants credit in bytes, the sender spends it and waits when it has
/// none. Bytes rather than messages, because messages range from a few bytes to many megabytes: a
/// window of N messages would bound neither memory nor the time a slow consumer holds data.
public enum FlowControl {
    /// Credit each side starts with for each call it sends messages on: 1 MiB. HTTP/2's 64 KiB
    /// default is known to be too small for gRPC (which grows it by probing); 1 MiB keeps sixteen
    /// 64 KiB messages in flight, and bounds what one call can make its receiver buffer.
    public static let initialWindow = 1 << 20
    /// Largest payload of one MESSAGE frame this implementation sends: larger messages go out in
    /// chunks of this size, so that other calls' frames interleave with them.
    public static let maxChunk = 256 << 10
    /// Credit worth waiting for before sending a chunk of a larger message (HTTP/2's smallest
    /// frame size), so that a nearly spent window does not cut a message into slivers.
    public static let minChunk = 16 << 10
    /// Credit a MESSAGE frame costs beyond its payload (gRPC's 5-byte message prefix), so that a
    /// stream of empty messages is bounded too.
    public static let messageOverhead = 5
    /// Largest message a receiver joins from chunks unless configured otherwise: 64 MiB.
    public static let defaultMaxMessageSize = 64 << 20

    /// What a message of `size` bytes sent whole costs.
    @inline(__always)
    package static func cost(_ size: Int) -> Int { size + messageOverhead }
}

/// The sending side's credit for one call: spent by the sender, granted by the receiver's
/// WINDOW_UPDATEs. Senders take turns (`withTurn`), one message each, so that the chunks of
/// messages sent concurrently on one call never interleave.
package final class SendWindow: Sendable {
    private struct State {
        var credit: Int
        var waiter: UnsafeContinuation<Void, any Error>?
        var failure: (any Error)?
        /// Whether a sender has the turn, and those waiting for it, in order, by ticket.
        var turnTaken = false
        var turnQueue: [(ticket: Int, continuation: UnsafeContinuation<Void, any Error>)] = []
        var lastTicket = 0
    }

    private let state: Mutex<State>

    package init(credit: Int = FlowControl.initialWindow) {
        state = Mutex(State(credit: credit))
    }

    /// Credit left (negative after an in-process sender took a message larger than it).
    package var credit: Int { state.withLock { $0.credit } }

    /// Waits until at least `minimum` bytes of credit are there, then takes up to `wanted` of them
    /// and returns how many it took. Throws the failure once the call is over, and CANCELLED when
    /// the waiting task is cancelled.
    package func take(upTo wanted: Int, atLeast minimum: Int) async throws -> Int {
        try await waitForCredit { state in
            let granted = min(state.credit, wanted)
            state.credit -= granted
            return granted
        } ready: { state in
            state.credit >= minimum
        }
    }

    /// Takes `cost` whole once the credit is at least `min(cost, window)` (so a message larger
    /// than the window waits for the whole window, then leaves the credit negative): for senders
    /// that do not cut messages into chunks (in-process).
    package func takeWhole(_ cost: Int, window: Int = FlowControl.initialWindow) async throws {
        let minimum = min(cost, window)
        _ = try await waitForCredit { state in
            state.credit -= cost
            return cost
        } ready: { state in
            state.credit >= minimum
        }
    }

    /// Runs `body` (which sends one message, taking credit as it goes) once the senders before it
    /// are done; throws the call's failure, or CANCELLED when cancelled while waiting.
    package func withTurn<T>(_ body: () async throws -> T) async throws -> T {
        try await takeTurn()
        defer { passTurn() }
        return try await body()
    }

    /// Sends one message within this window's credit, in its turn: whole when it fits in a chunk
    /// and the credit, else in chunks of at most `FlowControl.maxChunk`, waiting for at least
    /// `FlowControl.minChunk` of credit before each. `write` puts one chunk on the wire (`continues`:
    /// more of the message follows), first waiting for its connection if it must, and throws once
    /// the call is over. The one place messages are cut, so both ends of every transport cut alike.
    package func send(_ message: [UInt8], write: (_ chunk: [UInt8], _ continues: Bool) async throws -> Void)
        async throws
    {
        try await withTurn {
            var offset = 0
            repeat {
                let wanted = FlowControl.cost(min(message.count - offset, FlowControl.maxChunk))
                let granted = try await take(upTo: wanted, atLeast: min(wanted, FlowControl.cost(FlowControl.minChunk)))
                let size = granted - FlowControl.messageOverhead
                let chunk = size == message.count ? message : Array(message[offset..<offset + size])
                offset += size
                try await write(chunk, offset < message.count)
            } while offset < message.count
        }
    }

    private func takeTurn() async throws {
        let ticket = try state.withLock { state throws -> Int? in
            if let failure = state.failure { throw failure }
            guard state.turnTaken else {
                state.turnTaken = true
                return nil
            }
            state.lastTicket += 1
            return state.lastTicket
        }
        guard let ticket else { return }
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                let resumeWith = state.withLock { state -> (any Error)? in
                    if let failure = state.failure { return failure }
                    if Task.isCancelled { return RPCError(.cancelled, "the call was cancelled") }
                    state.turnQueue.append((ticket, continuation))
                    return nil
                }
                if let resumeWith { continuation.resume(throwing: resumeWith) }
            }
        } onCancel: {
            state.withLock { state -> UnsafeContinuation<Void, any Error>? in
                guard let index = state.turnQueue.firstIndex(where: { $0.ticket == ticket }) else { return nil }
                return state.turnQueue.remove(at: index).continuation
            }?.resume(throwing: RPCError(.cancelled, "the call was cancelled"))
        }
    }

    /// Hands the turn to the next sender waiting, if any.
    private func passTurn() {
        let next = state.withLock { state -> UnsafeContinuation<Void, any Error>? in
            guard !state.turnQueue.isEmpty else {
                state.turnTaken = false
                return nil
            }
            return state.turnQueue.removeFirst().continuation  // the turn stays taken, by it
        }
        next?.resume()
    }

    /// The receiver granted `bytes` more (the credit stays below 2^31, as HTTP/2 caps its windows).
    package func grant(_ bytes: Int) {
        let waiter = state.withLock { state -> UnsafeContinuation<Void, any Error>? in
            state.credit = min(state.credit + max(0, bytes), Int(Int32.max))
            return state.waiter.take()
        }
        waiter?.resume()
    }

    /// The call is over: waiting senders, and any later one, fail with `error`.
    package func fail(_ error: any Error) {
        let (waiter, queued) = state.withLock { state in
            if state.failure == nil { state.failure = error }
            defer { state.turnQueue.removeAll() }
            return (state.waiter.take(), state.turnQueue.map(\.continuation))
        }
        waiter?.resume(throwing: error)
        for sender in queued { sender.resume(throwing: error) }
    }

    private func waitForCredit(
        _ take: (inout State) -> Int, ready: (State) -> Bool
    ) async throws -> Int {
        while true {
            let outcome = try state.withLock { state throws -> Int? in
                if let failure = state.failure { throw failure }
                guard ready(state) else { return nil }
                return take(&state)
            }
            if let outcome { return outcome }
            try await withTaskCancellationHandler {
                try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                    let resumeWith = state.withLock { state -> Result<Void, any Error>? in
                        if let failure = state.failure { return .failure(failure) }
                        if Task.isCancelled { return .failure(RPCError(.cancelled, "the call was cancelled")) }
                        if ready(state) { return .success(()) }
                        precondition(state.waiter == nil, "two senders wait on one call's window")
                        state.waiter = continuation
                        return nil
                    }
                    if let resumeWith { continuation.resume(with: resumeWith) }
                }
            } onCancel: {
                state.withLock { $0.waiter.take() }?.resume(throwing: RPCError(.cancelled, "the call was cancelled"))
            }
        }
    }
}

/// The receiving side of one call's messages: joins chunks, queues complete messages for the
/// consumer, and grants the sender credit back as the consumer takes them, so the queue never
/// holds more than a window. A single consumer.
package final class MessageInbox: Sendable {
    /// What went wrong with what the sender sent; the call fails with it.
    package struct Violation: Error {
        package let error: RPCError
    }

    private struct State {
        var queue: [(bytes: [UInt8], cost: Int)] = []
        /// Index of the oldest queued message.
        var head = 0
        /// Credit the queued messages cost.
        var buffered = 0
        /// The message being joined from chunks.
        var partial: [UInt8]?
        /// Credit of the joined chunks not granted back yet: they arrived behind queued messages.
        var partialCost = 0
        /// Credit the sender still has (as this side counts it).
        var available: Int
        /// Credit consumed and not yet granted back.
        var unacknowledged = 0
        /// Set once the sender half-closed (nil) or the call failed.
        var end: Result<Void, any Error>?
        var waiter: UnsafeContinuation<[UInt8]?, any Error>?
    }

    private let state: Mutex<State>
    private let window: Int
    private let maxMessageSize: Int
    private let grant: @Sendable (Int) -> Void
    /// Turns each message as it arrived into the one the consumer takes (a door's `RequestDecoder`: inflating, JSON),
    /// on the consumer's thread as it takes it, so no message is decoded on the transport's thread or before the
    /// consumer — a handler the guard admitted — asks for it. Nil: messages are taken as they came.
    private let decoding: (@Sendable ([UInt8]) throws(RPCError) -> [UInt8])?

    /// `grant` sends the sender credit (a WINDOW_UPDATE); it is called outside any lock, from the
    /// thread that consumed or received.
    package init(
        window: Int = FlowControl.initialWindow, maxMessageSize: Int = FlowControl.defaultMaxMessageSize,
        decoding: (@Sendable ([UInt8]) throws(RPCError) -> [UInt8])? = nil, grant: @escaping @Sendable (Int) -> Void
    ) {
        self.window = window
        self.maxMessageSize = maxMessageSize
        self.decoding = decoding
        self.grant = grant
        state = Mutex(State(available: window))
    }

    /// An inbox holding `messages` and closed: the requests of a call whose single request came whole.
    package convenience init(closedWith messages: [[UInt8]]) {
        self.init(grant: { _ in })
        state.withLock { state in
            state.queue = messages.map { ($0, FlowControl.cost($0.count)) }
            state.buffered = state.queue.reduce(0) { $0 + $1.cost }
            state.end = .success(())
        }
    }

    /// Bytes of complete messages waiting for the consumer (their credit cost).
    package var bufferedBytes: Int { state.withLock { $0.buffered } }

    /// One MESSAGE frame's payload arrived (transport thread). Throws `Violation` when it exceeds
    /// the sender's credit or makes a message larger than the largest allowed; the caller ends
    /// the call with it.
    package func receive(chunk: [UInt8], continues: Bool) throws(Violation) {
        let cost = FlowControl.cost(chunk.count)
        var toGrant = 0
        let delivery = try state.withLock {
            state throws(Violation) -> (UnsafeContinuation<[UInt8]?, any Error>, [UInt8])? in
            guard state.end == nil else { return nil }  // over, or half-closed already: dropped
            guard cost <= state.available else {
                throw Violation(
                    error: RPCError(
                        .resourceExhausted,
                        "flow control: a message frame of \(cost) bytes exceeds the \(state.available) bytes of credit left"
                    ))
            }
            guard (state.partial?.count ?? 0) + chunk.count <= maxMessageSize else {
                throw Violation(
                    error: RPCError(.resourceExhausted, "message larger than the limit of \(maxMessageSize) bytes"))
            }
            state.available -= cost
            var message: [UInt8]
            if var partial = state.partial.take() {
                partial.append(contentsOf: chunk)
                message = partial
            } else {
                message = chunk
            }
            if continues {
                state.partial = message
                if state.head == state.queue.count {
                    // The message being joined is the next the consumer takes: its chunks' credit goes
                    // back at once, bounded by the largest message size rather than by the window, or a
                    // message larger than the window could never complete.
                    toGrant = acknowledge(cost, &state)
                } else {
                    // Behind queued messages its chunks hold their credit until those are taken:
                    // granted back at once, they let a sender queue message after message of chunks
                    // (2 MiB behind a 1 MiB window in a test; any amount for a hostile one).
                    state.partialCost += cost
                }
                return nil
            }
            let total = cost + state.partialCost
            state.partialCost = 0
            // The message's credit goes back when the consumer takes it.
            if let waiter = state.waiter.take() {
                toGrant = acknowledge(total, &state)
                return (waiter, message)
            }
            state.queue.append((message, total))
            state.buffered += total
            return nil
        }
        if toGrant > 0 { grant(toGrant) }
        if let (waiter, message) = delivery { waiter.resume(returning: message) }
    }

    /// A complete message from a sender in this process, that took `takeWhole` credit for it.
    package func receive(message: [UInt8]) {
        let cost = FlowControl.cost(message.count)
        var toGrant = 0
        let waiter = state.withLock { state -> UnsafeContinuation<[UInt8]?, any Error>? in
            guard state.end == nil else { return nil }
            state.available -= cost
            if let waiter = state.waiter.take() {
                toGrant = acknowledge(cost, &state)
                return waiter
            }
            state.queue.append((message, cost))
            state.buffered += cost
            return nil
        }
        if toGrant > 0 { grant(toGrant) }
        waiter?.resume(returning: message)
    }

    /// No more messages: the sender half-closed (`error == nil`, after the queued messages) or the
    /// call failed (`discarding` drops what is queued, so the consumer learns of it at once).
    package func finish(error: (any Error)? = nil, discarding: Bool = false) {
        var error = error
        let waiter = state.withLock { state -> UnsafeContinuation<[UInt8]?, any Error>? in
            guard state.end == nil else { return nil }
            if error == nil, state.partial != nil {
                // Half-closed in the middle of a message: what came of it is no message.
                error = RPCError(
                    .invalidArgument, "the stream ended inside a message (its last chunk said more would follow)")
            }
            state.end = error.map { .failure($0) } ?? .success(())
            state.partial = nil
            state.partialCost = 0
            if discarding {
                state.queue = []
                state.head = 0
                state.buffered = 0
            }
            return state.waiter.take()
        }
        if let waiter {
            if let error { waiter.resume(throwing: error) } else { waiter.resume(returning: nil) }
        }
    }

    /// The next message; nil once the sender half-closed and every message was taken. Throws the
    /// call's failure, CANCELLED when the waiting task is cancelled, or what decoding the message threw.
    package func next() async throws -> [UInt8]? {
        guard let message = try await nextArrived() else { return nil }
        guard let decoding else { return message }
        return try decoding(message)
    }

    /// The next message as it arrived.
    private func nextArrived() async throws -> [UInt8]? {
        var toGrant = 0
        let taken = try state.withLock { state throws -> [UInt8]?? in
            if let message = pop(&state, &toGrant) { return .some(message) }
            switch state.end {
            case .success: return .some(nil)
            case .failure(let error): throw error
            case nil: return nil
            }
        }
        if toGrant > 0 { grant(toGrant) }
        if let taken { return taken }
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<[UInt8]?, any Error>) in
                var toGrant = 0
                let resumeWith = state.withLock { state -> Result<[UInt8]?, any Error>? in
                    if let message = pop(&state, &toGrant) { return .success(message) }
                    switch state.end {
                    case .success: return .success(nil)
                    case .failure(let error): return .failure(error)
                    case nil: break
                    }
                    if Task.isCancelled { return .failure(RPCError(.cancelled, "the call was cancelled")) }
                    precondition(state.waiter == nil, "two consumers wait on one call's messages")
                    state.waiter = continuation
                    return nil
                }
                if toGrant > 0 { grant(toGrant) }
                if let resumeWith { continuation.resume(with: resumeWith) }
            }
        } onCancel: {
            state.withLock { $0.waiter.take() }?.resume(throwing: RPCError(.cancelled, "the call was cancelled"))
        }
    }

    private func pop(_ state: inout State, _ toGrant: inout Int) -> [UInt8]? {
        guard state.head < state.queue.count else { return nil }
        let (message, cost) = state.queue[state.head]
        state.queue[state.head] = ([], 0)
        state.head += 1
        if state.head == state.queue.count {
            state.queue.removeAll(keepingCapacity: true)
            state.head = 0
        } else if state.head >= 256, state.head * 2 >= state.queue.count {
            state.queue.removeFirst(state.head)
            state.head = 0
        }
        state.buffered -= cost
        var released = cost
        if state.head == state.queue.count, state.partialCost > 0 {
            // The message being joined is next now: what its chunks held goes back.
            released += state.partialCost
            state.partialCost = 0
        }
        toGrant = acknowledge(released, &state)
        return message
    }

    /// Counts `cost` as consumed; returns the credit to grant back now (once half the window is
    /// consumed, as HTTP/2 implementations do, so WINDOW_UPDATEs stay few), or 0.
    private func acknowledge(_ cost: Int, _ state: inout State) -> Int {
        guard state.end == nil else { return 0 }
        state.unacknowledged += cost
        guard state.unacknowledged >= window / 2 else { return 0 }
        defer { state.unacknowledged = 0 }
        state.available += state.unacknowledged
        return state.unacknowledged
    }
}

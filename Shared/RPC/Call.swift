import Base
import Schema
import Synchronization

/// What opens a call, independent of the transport that carried it.
public struct CallHead: Sendable {
    /// Method path, e.g. `/menagerie.zoo.v1.Zoo/SearchAnimals`.
    public var method: String
    public var metadata: Metadata
    /// When the caller stops waiting; nil = no deadline.
    public var deadline: ContinuousClock.Instant?
    /// Who is calling (`127.0.0.1:50312`), for logs.
    public var peer: String
    /// The subject of the client's certificate (`O=Menagerie, CN=classification`) when the call came over mutual
    /// TLS: who the caller is as the stack's CA vouches, for methods only the replicas of a service may call.
    public var peerCertificate: String?

    public init(
        method: String, metadata: Metadata = [:], deadline: ContinuousClock.Instant? = nil, peer: String = "",
        peerCertificate: String? = nil
    ) {
        self.method = method
        self.metadata = metadata
        self.deadline = deadline
        self.peer = peer
        self.peerCertificate = peerCertificate
    }
}

/// What a handler knows about the call it serves.
public struct ServerContext: Sendable {
    public var method: String
    public var metadata: Metadata
    public var deadline: ContinuousClock.Instant?
    public var peer: String
    /// The subject of the client's certificate when the call came over mutual TLS (see `CallHead`).
    public var peerCertificate: String?
    /// The peer's address without its port: what per-client bounds count by until calls carry a user.
    public var peerHost: String {
        guard let colon = peer.lastIndex(of: ":"), !peer.hasSuffix("]") else { return peer }
        return String(peer[..<colon])
    }
    /// Whom per-caller bounds (jobs queued) count a call against: its user, else its address.
    public var submitter: String { caller.map { "user \($0.name)" } ?? peerHost }
    /// Who is calling, as the server's `CallGuard` established it; nil for an anonymous call (a method
    /// everyone may call) or a server without a guard.
    public var caller: Caller?
    /// Where the transport says the call is over before the handler's task hears of it.
    private let sink: (any ResponseSink)?

    init(_ head: CallHead, caller: Caller? = nil, sink: (any ResponseSink)? = nil) {
        method = head.method
        metadata = head.metadata
        deadline = head.deadline
        peer = head.peer
        peerCertificate = head.peerCertificate
        self.caller = caller
        self.sink = sink
    }

    /// Whether the call is over for its caller (it cancelled, went away, or the server ended the call):
    /// the handler's task is cancelled, or, for a handler that has not suspended yet (whose task the
    /// transport may not know), the transport says so.
    public var isCancelled: Bool { Task.isCancelled || sink?.isCancelled == true }

    /// Throws CANCELLED once the caller went away or DEADLINE_EXCEEDED once the deadline passed;
    /// long handlers call it between steps.
    public func checkAlive() throws {
        if let deadline, deadline <= .now {
            throw RPCError(.deadlineExceeded, "deadline passed while serving \(method)")
        }
        if isCancelled { throw RPCError(.cancelled, "call to \(method) was cancelled") }
    }
}

/// Where the server core writes the outcome of one call; each transport provides its own.
public protocol ResponseSink: Sendable {
    /// Sends one message of a server-streaming or bidirectional call. Suspends while the call has
    /// no credit (its client reads slowly) or the connection is above its high-water mark; throws
    /// once the call is over (cancelled, deadline, connection gone).
    func send(_ message: [UInt8]) async throws
    /// Ends the call: OK (`error == nil`, with the unary response in `message`) or an error status.
    /// Only the first call takes effect, and only it returns true: the server counts a call's status
    /// where it took effect, so a status the transport gave first (a deadline) is not counted twice.
    @discardableResult
    func finish(message: [UInt8]?, error: RPCError?) -> Bool
    /// Whether the transport has ended the call (its client cancelled or left, its deadline passed),
    /// also while the handler computes before its first suspension, when its task may not be known
    /// to the transport and so not yet cancelled. False by default.
    var isCancelled: Bool { get }
}

extension ResponseSink {
    public var isCancelled: Bool { false }
}

/// The typed side of the responses of a server-streaming or bidirectional call.
public struct ResponseWriter<Response: ProtoMessage>: Sendable {
    let sink: any ResponseSink

    /// Sends one response message, waiting while the client does not keep up (flow control).
    /// Concurrent sends take turns, one message each.
    ///
    /// The message is consumed: once encoded, only its bytes stay while the call waits for credit,
    /// so a stream whose client grants none holds one encoded message, not its decoded copy too.
    /// A large message holds its bytes of the process's memory budget until the transport has it
    /// (which then counts them as unread answers): when the budget is spent by streams nobody reads,
    /// the next large message waits for room, then fails the call with RESOURCE_EXHAUSTED, instead
    /// of taking the process past its budget.
    public func send(_ response: consuming Response) async throws {
        let bytes = try response.serializedBytesRefusingNUL()
        _ = consume response
        guard bytes.count >= MemoryBudget.largeFrame else { return try await sink.send(bytes) }
        try await deliver(bytes, holding: 0, of: MemoryBudget.process)
    }

    /// Reserves room in the process's memory budget for an answer about to be built, waiting as `send` does (then
    /// RESOURCE_EXHAUSTED): a stream that builds large pages takes room before building one, so pages built for
    /// clients that read nothing cannot pile up outside the budget while they wait for it. Pass the room to
    /// `send(_:in:)`, which trades it for the encoded answer's size.
    /// At most half the budget is reserved ahead, so a reckoning larger than a small budget still lets pages go.
    public func reserveRoom(_ bytes: Int) async throws -> AnswerRoom {
        let budget = MemoryBudget.process
        let bytes = min(bytes, budget.limit / 2)
        try await Self.reserve(bytes, of: budget, unless: sink)
        return AnswerRoom(bytes: bytes, budget: budget)
    }

    /// Sends an answer built in `room` (see `reserveRoom`): the room becomes the encoded bytes' share of the
    /// budget (more is waited for, the surplus given back) until the transport has them. Returns the encoded size,
    /// from which a stream can reckon its next page's room.
    @discardableResult
    public func send(_ response: consuming Response, in room: AnswerRoom) async throws -> Int {
        let bytes = try response.serializedBytesRefusingNUL()
        _ = consume response
        let count = bytes.count
        try await deliver(bytes, holding: room.take(), of: room.budget)
        return count
    }

    /// Sends encoded `bytes` holding exactly their size of `budget` until the transport has them, given `held` bytes
    /// of it already reserved: more is waited for, the surplus given back at once. The one path of both sends.
    private func deliver(_ bytes: [UInt8], holding held: Int, of budget: MemoryBudget) async throws {
        var held = held
        defer { budget.release(held) }
        if bytes.count > held {
            try await Self.reserve(bytes.count - held, of: budget, unless: sink)
        } else {
            budget.release(held - bytes.count)
        }
        held = bytes.count
        try await sink.send(bytes)
    }

    /// How long a large answer waits for room in the budget before its call fails: long enough for
    /// readers that are merely slow to take theirs, short enough that a stalled producer lets go.
    static var budgetPatience: Duration { .seconds(5) }

    private static func reserve(_ bytes: Int, of budget: MemoryBudget, unless sink: any ResponseSink) async throws {
        guard await budget.reserve(bytes, waitingUpTo: budgetPatience, unless: { sink.isCancelled }) else {
            if sink.isCancelled || Task.isCancelled {
                throw RPCError(.cancelled, "the call ended while its answer waited for memory")
            }
            throw RPCError(
                .resourceExhausted,
                "the server's memory budget (\(budget.limit >> 20) MiB) cannot hold this call's next answer of \(bytes) bytes: "
                    + "its clients are not reading theirs; retry later")
        }
    }
}

/// Tuning of one call made by a client.
public struct CallOptions: Sendable {
    /// How long the caller waits for the whole call; nil = no deadline.
    public var timeout: Duration?
    public var metadata: Metadata
    /// Whether the call may be retried on another endpoint after UNAVAILABLE; nil = the method's own
    /// `idempotency_level` decides.
    public var idempotent: Bool?

    public init(timeout: Duration? = nil, metadata: Metadata = [:], idempotent: Bool? = nil) {
        self.timeout = timeout
        self.metadata = metadata
        self.idempotent = idempotent
    }
}

/// Room reserved in the process's memory budget for one answer being built (`ResponseWriter.reserveRoom`). Given back
/// by the `send` it is passed to, or when dropped unused.
public final class AnswerRoom: Sendable {
    let budget: MemoryBudget
    private let held: Atomic<Int>

    init(bytes: Int, budget: MemoryBudget) {
        self.budget = budget
        held = Atomic(bytes)
    }

    /// The reserved bytes, now the caller's to give back.
    func take() -> Int { held.exchange(0, ordering: .acquiringAndReleasing) }

    deinit { budget.release(held.load(ordering: .acquiring)) }
}

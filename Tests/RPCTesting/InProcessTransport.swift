import RPC
import Synchronization

/// Calls a server living in the same process, with no sockets and no framing: for unit tests of
/// services and of the RPC core itself. Deadlines, cancellation and flow control behave as over
/// TCP, except that messages are not cut into chunks (a message larger than the window waits for
/// the whole window).
public final class InProcessTransport: ClientTransport {
    public let server: RPCServer
    public var endpoint: String { "in-process:\(server.name)" }
    public var isAvailable: Bool { true }

    public init(server: RPCServer) { self.server = server }

    public func unary(_ head: CallHead, request: [UInt8]) async throws -> [UInt8] {
        let call = stream(head, request: request)
        var last: [UInt8]?
        do {
            while let message = try await call.next() { last = message }
        } catch {
            call.cancel()
            throw error
        }
        guard let last else { throw RPCError(.internalError, "\(head.method) ended without a response") }
        return last
    }

    public func stream(_ head: CallHead, request: [UInt8]?) -> any ClientCall {
        let head = CallHead(method: head.method, metadata: head.metadata, deadline: head.deadline, peer: "in-process")
        let incoming = server.accept(head)
        let call = InProcessCall(incoming)
        let input: CallInput = request.map { .single($0) } ?? .stream(call.requests)
        let sink = call.sink
        let task = Task { await incoming.serve(input, responses: sink) }
        let watchdog = head.deadline.map { deadline in
            Task {
                try await Task.sleep(until: deadline, clock: .continuous)
                call.end(
                    message: nil, error: RPCError(.deadlineExceeded, "deadline exceeded waiting for \(head.method)"),
                    local: true)
            }
        }
        call.started(task, watchdog: watchdog)
        return call
    }

    public func close() {}
}

/// Both ends of one in-process call: the client's `ClientCall`, and through `sink` the server's
/// `ResponseSink`; each direction an inbox with its sender's window.
private final class InProcessCall: ClientCall {
    let method: String
    /// The call as the server accepted it: told when this side ended it first (cancel, deadline).
    private let incoming: IncomingCall
    private let requestWindow = SendWindow()
    let requests: MessageInbox
    private let responseWindow = SendWindow()
    private let responses: MessageInbox
    /// The server's task and the deadline's, once started, and whether the call is over.
    private let tasks = Mutex<(call: Task<Void, Never>?, watchdog: Task<Void, any Error>?, over: Bool, local: Bool)>(
        (nil, nil, false, false))

    init(_ incoming: IncomingCall) {
        self.incoming = incoming
        method = incoming.head.method
        requests = MessageInbox(grant: { [requestWindow] in requestWindow.grant($0) })
        responses = MessageInbox(grant: { [responseWindow] in responseWindow.grant($0) })
    }

    var sink: some ResponseSink { InProcessSink(call: self) }

    func started(_ call: Task<Void, Never>, watchdog: Task<Void, any Error>?) {
        let (over, local) = tasks.withLock { tasks -> (Bool, Bool) in
            guard !tasks.over else { return (true, tasks.local) }
            tasks.call = call
            tasks.watchdog = watchdog
            return (false, false)
        }
        if over { watchdog?.cancel() }
        if local { call.cancel() }
    }

    var isOver: Bool { tasks.withLock { $0.over } }

    // MARK: Client side

    func send(_ message: [UInt8]) async throws {
        try await requestWindow.withTurn {
            try await requestWindow.takeWhole(FlowControl.cost(message.count))
            requests.receive(message: message)
        }
    }

    func closeRequests() { requests.finish() }

    func next() async throws -> [UInt8]? { try await responses.next() }

    func cancel() { end(message: nil, error: RPCError(.cancelled, "call to \(method) was cancelled"), local: true) }

    var bufferedBytes: Int { responses.bufferedBytes }

    // MARK: Server side

    func respond(_ message: [UInt8]) async throws {
        try await responseWindow.withTurn {
            try await responseWindow.takeWhole(FlowControl.cost(message.count))
            responses.receive(message: message)
        }
    }

    /// Ends the call once: with the server's answer, or locally (cancelled, deadline), which drops
    /// unread responses and cancels the handler.
    @discardableResult
    func end(message: [UInt8]?, error: RPCError?, local: Bool) -> Bool {
        guard
            let (call, watchdog) = tasks.withLock({ tasks -> (Task<Void, Never>?, Task<Void, any Error>?)? in
                guard !tasks.over else { return nil }
                tasks.over = true
                tasks.local = local
                defer { (tasks.call, tasks.watchdog) = (nil, nil) }
                return (tasks.call, tasks.watchdog)
            })
        else { return false }
        if let message { responses.receive(message: message) }
        responses.finish(error: error, discarding: local)
        let over = error ?? RPCError(.cancelled, "call to \(method) is over")
        requests.finish(error: over, discarding: true)
        requestWindow.fail(over)
        responseWindow.fail(over)
        watchdog?.cancel()
        if local {
            call?.cancel()
            incoming.answered(error?.code ?? .cancelled)
        }
        return true
    }
}

/// The server's side of an in-process call.
private struct InProcessSink: ResponseSink {
    let call: InProcessCall

    func send(_ message: [UInt8]) async throws {
        guard !call.isOver else { throw RPCError(.cancelled, "the caller went away") }
        try await call.respond(message)
    }

    func finish(message: [UInt8]?, error: RPCError?) -> Bool { call.end(message: message, error: error, local: false) }
}

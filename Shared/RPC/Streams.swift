import Schema
import Synchronization

/// The requests of a client-streaming or bidirectional call, as its handler reads them: ends when
/// the client half-closes; throws CANCELLED or DEADLINE_EXCEEDED when the call ends first. The
/// client sends no more than the call's window ahead of what the handler has read, so a handler
/// that reads slowly (or never) holds up only its own client.
public struct RequestStream<Message: ProtoMessage>: AsyncSequence, Sendable {
    public typealias Element = Message
    let inbox: MessageInbox
    let method: String

    package init(inbox: MessageInbox, method: String) {
        self.inbox = inbox
        self.method = method
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let inbox: MessageInbox
        let method: String

        public mutating func next() async throws -> Message? {
            guard let bytes = try await inbox.next() else { return nil }
            do {
                return try Message(serializedBytes: bytes)
            } catch {
                throw RPCError(.invalidArgument, "request to \(method) is not a valid \(Message.protoName): \(error)")
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(inbox: inbox, method: method) }
}

/// One streaming call as a transport carries it, seen from the client. The call ends when the
/// server's status arrives, when `cancel` is called, or at its deadline.
public protocol ClientCall: Sendable {
    /// Sends one request message; suspends while the call has no credit (the server's handler
    /// reads slowly). Throws once the call is over.
    func send(_ message: [UInt8]) async throws
    /// Half-closes: the client sends no more requests (END_STREAM).
    func closeRequests()
    /// The next response message; nil once the call ended with OK. Throws its `RPCError`, or
    /// `ConnectFailure` when the call never left this process.
    func next() async throws -> [UInt8]?
    /// Ends the call from the client's side with CANCELLED (and tells the server); nothing once it ended.
    func cancel()
    /// Bytes of responses received and not yet taken by `next` (never more than a window).
    var bufferedBytes: Int { get }
}

/// The typed side of a client-streaming or bidirectional call's requests.
public struct RequestWriter<Request: ProtoMessage>: Sendable {
    let call: any ClientCall
    let method: String

    /// Sends one request message, waiting while the server does not keep up (flow control).
    /// Throws once the call is over (answered, cancelled, deadline, connection lost), and
    /// INVALID_ARGUMENT, sending nothing, for a message with a NUL in a string (`RPCClient.encode`).
    public func send(_ message: Request) async throws {
        try await call.send(RPCClient.encode(message, for: method))
    }
}

/// A call refused before it was sent (a request that cannot be encoded, a token that must not leave): every read
/// and write throws its error.
public struct RefusedCall: ClientCall {
    public let error: RPCError

    public init(error: RPCError) { self.error = error }

    public func send(_ message: [UInt8]) async throws { throw error }
    public func closeRequests() {}
    public func next() async throws -> [UInt8]? { throw error }
    public func cancel() {}
    public var bufferedBytes: Int { 0 }
}

/// The responses of a server-streaming or bidirectional call, as the client reads them. Holds at
/// most a window of unread responses (the server waits for more credit), so a consumer that reads
/// slowly or not at all costs bounded memory. Dropping the stream before its end cancels the call.
public struct ResponseStream<Response: ProtoMessage>: AsyncSequence, Sendable {
    public typealias Element = Response
    let source: ResponseSource

    init(_ source: ResponseSource) { self.source = source }

    /// Bytes of responses received and not yet read (for diagnostics and tests).
    public var bufferedBytes: Int { source.bufferedBytes }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let source: ResponseSource

        public mutating func next() async throws -> Response? {
            guard let bytes = try await source.next() else { return nil }
            do {
                return try Response(serializedBytes: bytes)
            } catch {
                source.cancel()
                throw RPCError(
                    .internalError, "response from \(source.method) is not a valid \(Response.protoName): \(error)")
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: source) }
}

/// The call behind a `ResponseStream`: maps transport failures to `RPCError`, reopens a
/// server-streaming call on another endpoint while no response arrived and the failure was one to
/// connect, and cancels the call when the last copy of the stream goes away.
final class ResponseSource: Sendable {
    let method: String
    private let state: Mutex<(call: any ClientCall, received: Bool, retriesLeft: Int)>
    /// Opens the call again elsewhere; nil when the call may not be retried.
    private let reopen: (@Sendable () -> any ClientCall)?

    init(method: String, call: any ClientCall, retries: Int = 0, reopen: (@Sendable () -> any ClientCall)? = nil) {
        self.method = method
        state = Mutex((call, false, retries))
        self.reopen = reopen
    }

    deinit { state.withLock { $0.call }.cancel() }

    var bufferedBytes: Int { state.withLock { $0.call }.bufferedBytes }

    func cancel() { state.withLock { $0.call }.cancel() }

    func next() async throws -> [UInt8]? {
        while true {
            let call = state.withLock { $0.call }
            do {
                let message = try await call.next()
                if message != nil { state.withLock { $0.received = true } }
                return message
            } catch let failure as ConnectFailure {
                let retry = state.withLock { state -> Bool in
                    guard !state.received, state.retriesLeft > 0, reopen != nil else { return false }
                    state.retriesLeft -= 1
                    return true
                }
                guard retry, let reopen else { throw RPCError(.unavailable, failure.description) }
                let next = reopen()
                state.withLock { $0.call = next }
            } catch let error as RPCError {
                throw error
            } catch {
                throw RPCError(.cancelled, "call to \(method) was cancelled")
            }
        }
    }
}

import RPC
import RPCWire
import Schema
import Synchronization

/// The server side of one connection: turns frames into calls, keeps each open call's state (its
/// slot, its flow-control window and request inbox) until its status is sent, and writes what
/// calls send.
///
/// The loop thread calls the frame handlers; calls (`ServerCall`, on workers) call `claim`,
/// `running`, `finished` and the sending side.
final class ServerConnection: @unchecked Sendable {
    let connection: TCPConnection
    /// The connection read as our frames, once its first byte says it speaks them.
    let frames: FrameReader
    let server: TCPServer
    /// Open calls by the id the client gave them. Each has a serial number the server gave it: once
    /// a call is over the client may use its id again, and what is left of the old call (its
    /// deadline, its handler if cancelled or expired) must not act on the new one.
    private let calls = Lock<[UInt64: CallEntry]>([:])
    /// Serial number of the last call started (loop thread).
    private var lastSerial: UInt64 = 0
    /// This connection's calls waiting for a worker.
    let queue: CallQueue
    /// Calls started by the frames of the read being parsed, handed to the pool together when the
    /// read's frames are done (or every `startBatch`), so a protocol error later in the same read (a
    /// reused call id) drops them before any worker could start one (loop thread).
    private var starting: [ServerCall] = []
    private static let startBatch = 16
    /// The highest call id the client has used, and CANCELs that arrived for ids above it: a
    /// cancel that overtook its request (loop thread). Bounded by the concurrent-call limit.
    private var highestID: UInt64 = 0
    private var cancelledAhead = Set<UInt64>()

    /// A call's entry, from the moment its request arrived until its status was sent.
    struct CallEntry {
        let serial: UInt64
        /// The call itself, whose flag tells a handler not yet known by its task that it is over.
        let call: ServerCall
        var slot: CallSlot
        /// Credit for the call's response MESSAGE frames, made when first needed (the first
        /// streamed response or WINDOW_UPDATE), so unary calls never make one.
        var window: SendWindow?
        /// The requests of a client-streaming or bidirectional call.
        let inbox: MessageInbox?
        /// The client cancelled it while its handler ran: it no longer counts against the limit of
        /// concurrent calls (the client stopped counting it when it sent the CANCEL).
        var cancelledByClient = false
    }

    /// Open calls the client has cancelled, whose handlers are still finishing (updated under `calls`' lock).
    private let cancelledCalls = Atomic<Int>(0)

    /// Removes call `id`'s entry (under `calls`' lock).
    private func remove(_ id: UInt64, _ calls: inout [UInt64: CallEntry]) {
        if calls.removeValue(forKey: id)?.cancelledByClient == true { cancelledCalls.subtract(1, ordering: .relaxed) }
    }

    enum CallSlot {
        /// Waiting for a worker: its job is in `queue` (or `starting`). Ending such a call removes
        /// its entry at once, and the worker that takes the job finds nothing to run.
        case queued
        /// A worker runs its handler, which has not suspended yet, so its task is not known here
        /// (`Task.immediate` returns it at the first suspension): ending the call sets its flag
        /// (`ServerCall.cancel`), which `ServerContext.checkAlive` sees, and `running` cancels the
        /// task once it is known.
        case claimed
        /// Its handler runs (or waits) in this task.
        case running(Task<Void, Never>)
    }

    /// Streaming handlers waiting for the client to read, by ticket (resumed on drain, close or
    /// cancellation).
    private let writers = Mutex<(waiting: [Int: CheckedContinuation<Void, any Error>], lastTicket: Int, closed: Bool)>(([:], 0, false))

    init(connection: TCPConnection, server: TCPServer) {
        self.connection = connection
        self.server = server
        queue = CallQueue(connection: connection)
        frames = FrameReader(connection, maxFrameSize: server.limits.maxFrameSize)
        frames.onFrame = { [unowned self] in received($0) }
        frames.onFramesEnd = { [unowned self] in startQueued() }
        frames.onFrameError = { [unowned self] error in frameError(error) }
        connection.onDrain = { [unowned self] in drained() }
    }

    /// The connection's first byte says it speaks `kind` (loop thread): our frames are read from now
    /// on; to a protocol not served here it is answered in that protocol and closed.
    func picked(_ kind: ProtocolSniffer.Kind) {
        switch kind {
        case .frames:
            connection.reader = frames
        case .http:
            refuseProtocol(ProtocolSniffer.httpNotServed, "an HTTP client: HTTP is not served yet")
        case .tls:
            refuseProtocol(ProtocolSniffer.tlsNotServed, "a TLS client: TLS is not served yet")
        }
    }

    /// Answers a client of another protocol with `reply` (its protocol's own refusal) and closes once
    /// that is written, lingering like any closing connection (loop thread).
    private func refuseProtocol(_ reply: [UInt8], _ reason: String) {
        connection.reader = nil
        connection.send(bytesOfSize: reply.count, sealing: true) { destination in
            reply.withUnsafeBytes { destination.copyMemory(from: $0) }
        }
        connection.close(afterFlushing: reason)
        if !connection.isClosed { server.uncount(self) }
    }

    var openCalls: Int { calls.withLock { $0.count } }

    /// Whether the client ever started a call here (loop thread): one that never did is reclaimed
    /// first when the connection limits are reached.
    var hasMadeCalls: Bool { lastSerial > 0 }

    /// No longer counted against the server's connection limits (loop thread; see `TCPServer.uncount`).
    var uncounted = false

    /// Whether the connection is being closed after a connection-level error.
    var isFailing: Bool { connection.closingSince != nil }

    /// A connection-level error: tells the client why (a STATUS frame with call id 0, after which
    /// nothing is sent), cancels every call and closes once that is written (loop thread).
    func fail(_ code: StatusCode, _ message: String) {
        connection.loop.assertInLoop()
        guard !isFailing, !connection.isClosed else { return }
        // Sealed as it is queued: an answer a worker writes now would otherwise follow it, and the
        // client would take that answer for the connection's last word (AbuseTests saw it).
        connection.send(Self.statusFrame(0, message: nil, error: RPCError(code, message)), sealing: true)
        cancelAll()
        connection.close(afterFlushing: message)
        if !connection.isClosed { server.uncount(self) }
    }

    // MARK: Frames from the client (loop thread)

    private func received(_ bytes: UnsafeRawBufferPointer) {
        connection.loop.assertInLoop()
        guard !bytes.isEmpty else {
            fail(.internalError, "protocol error: zero-length frame")
            return
        }
        let frame: RpcV1.Frame
        do {
            frame = try RpcV1.Frame(envelopeKeepingNUL: bytes)
        } catch {
            fail(.internalError, "protocol error: the envelope does not decode (\(error))")
            return
        }
        switch frame.kind {
        case .request: start(frame)
        case .message: receivedMessage(frame)
        case .endStream: calls.withLock { $0[frame.callID]?.inbox }?.finish()
        case .windowUpdate: responseWindow(frame.callID, serial: nil)?.grant(Int(frame.windowIncrement))
        case .cancel: cancel(frame.callID)
        case .status: fail(.internalError, "protocol error: a client may not send STATUS frames")
        default: fail(.internalError, "protocol error: unknown frame kind \(frame.kind.rawValue)")
        }
    }

    private func start(_ frame: RpcV1.Frame) {
        let id = frame.callID
        guard id != 0 else {
            fail(.internalError, "protocol error: call id 0 is reserved")
            return
        }
        if id > highestID { highestID = id }
        if !cancelledAhead.isEmpty, cancelledAhead.remove(id) != nil {
            // Its CANCEL overtook it: the client has given up on it already (and gets no answer,
            // as for a call cancelled while it waited for a worker).
            return
        }
        // Health checks are still answered while draining, NOT_SERVING, so that clients move away.
        if server.isDraining, frame.method != RpcV1.Health.check.path {
            refuse(id, server.rpc.accept(CallHead(method: frame.method, peer: connection.peer)), RPCError(.unavailable, "server is shutting down"))
            return
        }
        if frame.method.utf8.contains(0) || frame.metadata.contains(where: { $0.key.utf8.contains(0) || $0.value.utf8.contains(0) }) {
            refuse(
                id, server.rpc.accept(CallHead(method: frame.method, peer: connection.peer)),
                RPCError(.invalidArgument, "the method name or metadata contains a NUL character"))
            return
        }
        let head = CallHead(
            method: frame.method, metadata: Metadata(frame.metadata.map { ($0.key, $0.value) }),
            deadline: frame.timeoutMicros.map { .now + .microseconds(Int64(clamping: $0)) }, peer: connection.peer)
        lastSerial += 1
        let serial = lastSerial
        let incoming = server.rpc.accept(head)
        let inbox = frame.clientStream ? makeInbox(id) : nil
        let limit = server.limits.maxConcurrentCalls
        let call = ServerCall(
            connection: self, id: id, serial: serial, incoming: incoming, input: inbox.map { .stream($0) } ?? .single(frame.payload))
        let accepted = calls.withLock { calls -> Admission in
            guard calls[id] == nil else { return .idInUse }
            guard calls.count - cancelledCalls.load(ordering: .relaxed) < limit else { return .tooMany }
            calls[id] = CallEntry(serial: serial, call: call, slot: .queued, window: nil, inbox: inbox)
            return .accepted
        }
        switch accepted {
        case .accepted: break
        case .idInUse:
            // As HTTP/2 treats a reused stream id: an error of the connection. The earlier call is
            // cancelled and gets no answer, so the client cannot take this error for its result.
            inbox?.finish(error: RPCError(.cancelled, "call id reused"), discarding: true)
            fail(.internalError, "protocol error: call id \(id) is already open")
            return
        case .tooMany:
            inbox?.finish(error: RPCError(.resourceExhausted, "too many calls"), discarding: true)
            refuse(id, incoming, RPCError(.resourceExhausted, "more than \(limit) calls are open on this connection"))
            return
        }
        server.inFlight.add(1, ordering: .relaxed)
        server.callStarted()
        if let deadline = head.deadline { server.watch(deadline, of: id, serial: serial, method: head.method, on: self) }
        if incoming.answersAtOnce {
            // Health, reflection and stats answer at once, here on the loop (they never wait), rather
            // than queueing behind domain calls that may hold every worker.
            call.run()
        } else {
            starting.append(call)
            if starting.count >= Self.startBatch { startQueued() }
        }
        if connection.pendingBytes.load(ordering: .relaxed) > connection.highWater { connection.pauseReading() }
    }

    /// Hands the calls the last frames started to the worker pool (loop thread).
    private func startQueued() {
        guard !starting.isEmpty else { return }
        server.workers.submit(starting, to: queue)
        starting.removeAll(keepingCapacity: true)
    }

    /// The requests of client-streaming call `id`; its consumer's reads grant the client credit.
    private func makeInbox(_ id: UInt64) -> MessageInbox {
        MessageInbox(maxMessageSize: server.limits.maxMessageSize) { [weak self] bytes in
            self?.connection.send(RpcV1.Frame(callID: id, kind: .windowUpdate, windowIncrement: UInt32(clamping: bytes)))
        }
    }

    /// A request MESSAGE frame: into its call's inbox. Frames of a call that is over are dropped
    /// (the client may not have seen its status yet), as HTTP/2 drops DATA on a closed stream.
    private func receivedMessage(_ frame: RpcV1.Frame) {
        guard let (serial, inbox) = calls.withLock({ calls -> (UInt64, MessageInbox)? in
            guard let entry = calls[frame.callID], let inbox = entry.inbox else { return nil }
            return (entry.serial, inbox)
        }) else { return }
        do {
            try inbox.receive(chunk: frame.payload, continues: frame.continues)
        } catch {
            end(frame.callID, serial: serial, error: error.error)
        }
    }

    private func cancel(_ id: UInt64) {
        let (known, task) = calls.withLock { calls -> (Bool, Task<Void, Never>?) in
            guard let entry = calls[id] else { return (false, nil) }
            switch entry.slot {
            case .queued:
                // Gone at once (its worker will find nothing to run), so the id and its place under
                // the concurrent-call limit are free again, as they are for the client.
                entry.inbox?.finish(error: RPCError(.cancelled, "cancelled by the client"), discarding: true)
                remove(id, &calls)
                server.inFlight.subtract(1, ordering: .relaxed)
                return (true, nil)
            case .claimed, .running:
                if !entry.cancelledByClient {
                    calls[id]?.cancelledByClient = true
                    cancelledCalls.add(1, ordering: .relaxed)
                }
                entry.call.cancel()
                if case .running(let task) = entry.slot { return (true, task) }
                return (true, nil)
            }
        }
        task?.cancel()
        if !known, id > highestID, cancelledAhead.count < server.limits.maxConcurrentCalls {
            // Ids above every one used so far name calls still to come: this cancel overtook its request.
            cancelledAhead.insert(id)
        }
    }

    /// Cancels every open call (the connection is failing or closed): queued ones are dropped and
    /// never run, running ones are cancelled; none is answered, as the connection is sealed. The
    /// open calls left: those with a handler still to finish (loop thread).
    @discardableResult
    private func cancelAll() -> [CallEntry] {
        let (running, left) = calls.withLock { calls -> ([Task<Void, Never>], [CallEntry]) in
            var running: [Task<Void, Never>] = []
            var dropped = 0
            for (id, entry) in calls {
                switch entry.slot {
                case .queued:
                    entry.inbox?.finish(error: RPCError(.cancelled, "the connection closed"), discarding: true)
                    remove(id, &calls)
                    dropped += 1
                case .claimed: entry.call.cancel()
                case .running(let task):
                    entry.call.cancel()
                    running.append(task)
                }
            }
            if dropped > 0 { server.inFlight.subtract(dropped, ordering: .relaxed) }
            return (running, Array(calls.values))
        }
        starting.removeAll()
        server.workers.discard(queue)
        for task in running { task.cancel() }
        return left
    }

    private func frameError(_ error: FrameError) {
        switch error {
        case .tooLarge:
            fail(.resourceExhausted, error.description)
        case .overBudget(let length):
            fail(.resourceExhausted, error.description)
            server.shedLargest(atLeast: length, sparing: self)
        case .unsupportedFlags:
            fail(.internalError, "protocol error: \(error.description)")
        }
    }

    /// Answers a call that was not started (it is not open) with `error`; the server counts it.
    private func refuse(_ id: UInt64, _ call: IncomingCall, _ error: RPCError) {
        call.answered(error.code)
        answer(id, error: error)
    }

    // MARK: Call lifecycle

    /// Ends call `id` from the server's side before its handler did: answers `error` now and
    /// cancels the handler (deadline passed, flow control broken). Loop thread.
    func end(_ id: UInt64, serial: UInt64, error: RPCError) {
        connection.loop.assertInLoop()
        let entry = calls.withLock { calls -> CallEntry? in
            guard let entry = calls[id], entry.serial == serial else { return nil }
            // A queued call's worker finds nothing to run; a claimed one's handler sees the flag.
            remove(id, &calls)
            entry.call.cancel()
            return entry
        }
        guard let entry else { return }
        server.inFlight.subtract(1, ordering: .relaxed)
        entry.call.incoming.answered(error.code)
        entry.window?.fail(error)
        entry.inbox?.finish(error: error, discarding: true)
        if case .running(let task) = entry.slot { task.cancel() }
        answer(id, error: error)
    }

    /// A worker is about to run the call: true when it is still queued (not ended while it
    /// waited: cancelled, expired, its connection gone), in which case the caller must report its
    /// task with `running`.
    func claim(_ id: UInt64, serial: UInt64) -> Bool {
        calls.withLock { calls -> Bool in
            guard let entry = calls[id], entry.serial == serial, case .queued = entry.slot else { return false }
            calls[id]?.slot = .claimed
            return true
        }
    }

    /// The claimed call's handler runs (or ran) in `task`; cancels it when the call was ended
    /// meanwhile (its flag is set under the lock that also guards the slot).
    func running(_ call: ServerCall, task: Task<Void, Never>) {
        calls.withLock { calls in
            guard let entry = calls[call.id], entry.serial == call.serial, case .claimed = entry.slot else { return }  // over already
            calls[call.id]?.slot = .running(task)
        }
        if call.isCancelled { task.cancel() }
    }

    /// Called by a call's sink when it finished; only the first answer of a call is sent (a call
    /// that expired was answered already), and only then is this true (the server counts it).
    func finished(_ id: UInt64, serial: UInt64, status: RpcV1.Frame) -> Bool {
        let open = calls.withLock { calls -> Bool in
            guard let entry = calls[id], entry.serial == serial else { return false }
            remove(id, &calls)
            return true
        }
        guard open else { return false }  // ended already (answered, or its connection gone)
        // Queued before the call stops counting as in flight, so a shutdown waiting for that writes it.
        connection.send(status)
        server.inFlight.subtract(1, ordering: .releasing)
        return true
    }

    /// Whether call `id` may still send: it is open (not answered because of its deadline).
    func isOpen(_ id: UInt64, serial: UInt64) -> Bool {
        calls.withLock { calls in calls[id].map { $0.serial == serial } ?? false }
    }

    /// The credit window of open call `id` (of that serial, when given) for its response
    /// messages, made on first use; nil once the call is over.
    func responseWindow(_ id: UInt64, serial: UInt64?) -> SendWindow? {
        calls.withLock { calls in
            guard let entry = calls[id], serial.map({ $0 == entry.serial }) ?? true else { return nil }
            if let window = entry.window { return window }
            let window = SendWindow()
            calls[id]?.window = window
            return window
        }
    }

    // MARK: Writing

    private func answer(_ id: UInt64, error: RPCError) {
        connection.send(Self.statusFrame(id, message: nil, error: error))
    }

    /// Waits while the client has more unread response bytes than the high-water mark; throws once
    /// the connection closed or the call's task is cancelled (client cancel, deadline).
    func waitUntilWritable() async throws {
        guard connection.pendingBytes.load(ordering: .relaxed) > connection.highWater else { return }
        let ticket = writers.withLock { writers in
            writers.lastTicket += 1
            return writers.lastTicket
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow = writers.withLock { writers -> (any Error)?? in
                    if writers.closed { return .some(RPCError(.cancelled, "connection closed")) }
                    if Task.isCancelled { return .some(CancellationError()) }
                    if connection.pendingBytes.load(ordering: .relaxed) <= connection.lowWater { return .some(nil) }
                    writers.waiting[ticket] = continuation
                    return nil
                }
                if let outcome = resumeNow {
                    if let error = outcome { continuation.resume(throwing: error) } else { continuation.resume() }
                }
            }
        } onCancel: {
            writers.withLock { $0.waiting.removeValue(forKey: ticket) }?.resume(throwing: CancellationError())
        }
    }

    private func drained() {
        let waiting = writers.withLock { writers in
            defer { writers.waiting.removeAll() }
            return writers.waiting.values
        }
        for writer in waiting { writer.resume() }
        server.workers.unpark(queue)
        connection.resumeReading()
    }

    /// The connection closed: queued calls are dropped (the pool forgets their jobs), running ones
    /// cancelled (loop thread).
    func closed(reason: String) {
        connection.loop.assertInLoop()
        let error = RPCError(.cancelled, "connection closed: \(reason)")
        let streams = cancelAll().filter { $0.window != nil || $0.inbox != nil }
        let waiting = writers.withLock { writers in
            writers.closed = true
            defer { writers.waiting.removeAll() }
            return writers.waiting.values
        }
        for writer in waiting { writer.resume(throwing: error) }
        for stream in streams {
            stream.window?.fail(error)
            stream.inbox?.finish(error: error, discarding: true)
        }
    }

    static func statusFrame(_ id: UInt64, message: [UInt8]?, error: RPCError?) -> RpcV1.Frame {
        RpcV1.Frame(
            callID: id, kind: .status, hasPayload: message != nil, payload: message ?? [],
            statusCode: error?.code.rawValue ?? 0, statusMessage: error?.message ?? "")
    }
}

private enum Admission {
    case accepted, idInUse, tooMany
}

/// A call on its way through the server: queued on the worker pool (or run at once, for
/// built-ins), then served by its handler in a task of its own.
final class ServerCall: WorkerJob {
    let connection: ServerConnection
    /// Set when the call ended before its handler did (see `ServerConnection.CallSlot.claimed`).
    private let cancelled = Atomic<Bool>(false)
    let id: UInt64
    let serial: UInt64
    /// The call as the server accepted it: what serves it, and where the transport reports answering it.
    let incoming: IncomingCall
    let input: CallInput

    init(connection: ServerConnection, id: UInt64, serial: UInt64, incoming: IncomingCall, input: CallInput) {
        self.connection = connection
        self.id = id
        self.serial = serial
        self.incoming = incoming
        self.input = input
    }

    var workerTime: WorkerTime? { incoming.workerTime }

    /// Tells the handler its call is over (its client cancelled or left, its deadline passed).
    func cancel() { cancelled.store(true, ordering: .releasing) }

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Runs the handler right here, until it first waits, unless the call was cancelled or
    /// expired while it was queued.
    @discardableResult
    func run() -> Bool {
        guard connection.claim(id, serial: serial) else { return false }
        let task = Task.immediate { [self] in
            await incoming.serve(input, responses: TCPResponseSink(call: self))
        }
        connection.running(self, task: task)
        return true
    }
}

/// Writes one call's responses to its connection: each message within the call's credit (cut
/// into chunks when larger than `FlowControl.maxChunk` or the credit), and within the
/// connection's high-water mark.
struct TCPResponseSink: ResponseSink {
    let call: ServerCall

    var isCancelled: Bool { call.isCancelled }

    func send(_ message: [UInt8]) async throws {
        let connection = call.connection
        guard let window = connection.responseWindow(call.id, serial: call.serial) else {
            throw RPCError(.cancelled, "call \(call.id) is over")
        }
        try await window.send(message) { [call] chunk, continues in
            try await connection.waitUntilWritable()
            guard connection.isOpen(call.id, serial: call.serial) else { throw RPCError(.cancelled, "call \(call.id) is over") }
            connection.connection.send(RpcV1.Frame(callID: call.id, kind: .message, hasPayload: true, payload: chunk, continues: continues))
        }
    }

    func finish(message: [UInt8]?, error: RPCError?) -> Bool {
        call.connection.finished(call.id, serial: call.serial, status: ServerConnection.statusFrame(call.id, message: message, error: error))
    }
}

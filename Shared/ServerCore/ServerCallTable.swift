import RPC
import RPCWire
import ServerSeam
import Synchronization
import TCP

/// The protocol-neutral server side of one connection's calls: the table of open calls by the id
/// the client gave them, each call's flow-control window and request inbox, queueing calls on the
/// server's `WorkerPool` (the calls of one read together), deadlines, cancellation, back-pressure,
/// and reporting to the `RPCServer`, which counts each call once.
///
/// A wire protocol plugs in with two halves, through the seam (`ConnectionCalls`, ServerSeam): a reader of its bytes
/// (a `ConnectionReader`) that decodes them into this table's operations (`open`, `receiveMessage`, `endRequests`,
/// `grantResponseCredit`, `cancel`, `startQueued` at the end of a read), and a `CallWire` that encodes what the
/// table has it write. Our binary framing is `FrameServerConnection` with `FrameWire` (Framing); Connect is
/// `ConnectServerConnection` with `ConnectWire` (Connect): both over the same table and streams, neither known here.
/// One concrete class for every protocol (its wire an existential, one dynamic call per answer), so it is compiled
/// whole here rather than run as unspecialised generic code from the modules that use it.
///
/// The loop thread calls the operations; calls (`ServerCall`, on workers) call `claim`, `running`,
/// `finished` and the sending side.
package final class ServerCallTable: ConnectionCalls, CallDeadlines, @unchecked Sendable {
    /// How answers are written: the protocol's encoding half.
    package let wire: any CallWire
    /// The stream they are written to.
    private let stream: any ByteStream
    package let server: CallServer
    /// The calls of the loop this connection lives on: it watches their deadlines and flushes.
    private let serving: LoopCalls
    /// The client's address, which uploads are counted by.
    private let peerHost: String
    /// Open calls by the id the client gave them. Each has a serial number the server gave it: once
    /// a call is over the client may use its id again, and what is left of the old call (its
    /// deadline, its handler if cancelled or expired) must not act on the new one.
    private let calls = Lock<[UInt64: ServerCallEntry]>([:])
    /// Serial number of the last call started (loop thread).
    private var lastSerial: UInt64 = 0
    /// This connection's calls waiting for a worker.
    package let queue: CallQueue
    /// Calls started by the frames of the read being parsed, handed to the pool together when the
    /// read's frames are done (or every `startBatch`), so a protocol error later in the same read (a
    /// reused call id) drops them before any worker could start one (loop thread).
    private var starting: [ServerCall] = []
    private static var startBatch: Int { 16 }

    /// Open calls the client has cancelled, whose handlers are still finishing (updated under `calls`' lock).
    private let cancelledCalls = Atomic<Int>(0)

    /// Removes call `id`'s entry (under `calls`' lock).
    private func remove(_ id: UInt64, _ calls: inout [UInt64: ServerCallEntry]) {
        guard let index = calls.index(forKey: id) else { return }
        remove(at: index, &calls)
    }

    private func remove(at index: Dictionary<UInt64, ServerCallEntry>.Index, _ calls: inout [UInt64: ServerCallEntry]) {
        let entry = calls.remove(at: index).value
        if entry.cancelledByClient { cancelledCalls.subtract(1, ordering: .relaxed) }
        if entry.isUpload { server.uploadEnded(from: peerHost) }
    }

    /// Open call `id` of `serial`, and where it is in `calls` (to remove it without hashing again).
    private func entry(_ id: UInt64, serial: UInt64, in calls: [UInt64: ServerCallEntry]) -> (
        ServerCallEntry, Dictionary<UInt64, ServerCallEntry>.Index
    )? {
        guard let index = calls.index(forKey: id) else { return nil }
        let entry = calls.values[index]
        return entry.serial == serial ? (entry, index) : nil
    }

    /// Streaming handlers waiting for the client to read, by ticket (resumed on drain, close or
    /// cancellation).
    private let writers = Mutex<(waiting: [Int: CheckedContinuation<Void, any Error>], lastTicket: Int, closed: Bool)>(
        ([:], 0, false))

    /// The calls of `wire`'s stream, served on `loop` (the stream's), queued on `server`'s workers in `queue`.
    package init(wire: any CallWire, server: CallServer, loop: LoopCalls, queue: CallQueue) {
        self.wire = wire
        stream = wire.stream
        self.server = server
        self.queue = queue
        serving = loop
        peerHost = queue.connection?.peerHost ?? "unknown peer"
        wire.stream.onDrain = { [unowned self] in drained() }
    }

    /// Calls in the table, plus those whose answer is being queued: a call leaves the table before its STATUS is
    /// written (so that only one answer goes out), and the idle sweep must not take that moment for a quiet
    /// connection (TCPRobustnessTests' idle test saw a connection closed just as its answer was on its way).
    package var openCalls: Int { calls.withLock { $0.count } + answering.load(ordering: .acquiring) }

    /// Calls out of the table whose STATUS is not queued yet (`finished`).
    private let answering = Atomic<Int>(0)
    package var openUploads: Int { calls.withLock { $0.values.reduce(0) { $0 + ($1.isUpload ? 1 : 0) } } }

    /// Whether the client ever started a call here (loop thread): one that never did is reclaimed
    /// first when the connection limits are reached.
    package var hasMadeCalls: Bool { lastSerial > 0 }

    // MARK: Operations a protocol's reader decodes (loop thread)

    /// The client opened call `id`, whose requests are `input`'s: runs it on a worker (the built-in
    /// methods, which never wait, at once here on the loop), or answers it at once when it may not
    /// run. `clientStreams`: its requests come as messages (`receiveMessage`), else `payload` is its
    /// only one.
    ///
    /// `decoder`: the requests are as the door received them (compressed, JSON) and are decoded on the worker once the
    /// guard admitted the call — the only request before its handler runs, a stream's as its handler takes them.
    package func open(_ id: UInt64, _ head: CallHead, clientStreams: Bool, payload: [UInt8], decoder: RequestDecoder?)
        -> CallOpening
    {
        // Health checks are still answered while draining, NOT_SERVING, so that clients move away.
        if server.isDraining, head.method != RpcV1.Health.check.path {
            refuse(id, head, RPCError(.unavailable, "server is shutting down"))
            return .opened
        }
        lastSerial += 1
        let serial = lastSerial
        let incoming = server.rpc.accept(head)
        let inbox =
            clientStreams ? makeInbox(id, incoming, decoding: decoder.flatMap { incoming.decoding(with: $0) }) : nil
        let limit = server.limits.maxConcurrentCalls
        let input: CallInput = inbox.map { .stream($0) } ?? decoder.map { .encoded(payload, $0) } ?? .single(payload)
        let call = ServerCall(table: self, id: id, serial: serial, incoming: incoming, input: input)
        let isUpload = clientStreams && incoming.isUpload
        // (Counting another connection's uploads takes its lock: not while holding ours.)
        if isUpload, calls.withLock({ $0[id] == nil }), let refusal = uploadRefusal() {
            inbox?.finish(error: refusal, discarding: true)
            refuse(id, incoming, refusal)
            return .opened
        }
        let admission = calls.withLock { calls -> Admission in
            guard calls[id] == nil else { return .idInUse }
            guard calls.count - cancelledCalls.load(ordering: .relaxed) < limit else { return .tooMany }
            let entry = ServerCallEntry(serial: serial, call: call, slot: .queued, inbox: inbox)
            if isUpload {
                let now = ContinuousClock.now
                entry.pace = UploadPace(lastMessageAt: now, windowStart: now)
                entry.isUpload = true
                server.uploadOpened(from: peerHost)
            }
            calls[id] = entry
            return .accepted
        }
        switch admission {
        case .accepted: break
        case .idInUse:
            inbox?.finish(error: RPCError(.cancelled, "call id reused"), discarding: true)
            return .idInUse
        case .tooMany:
            inbox?.finish(error: RPCError(.resourceExhausted, "too many calls"), discarding: true)
            refuse(id, incoming, RPCError(.resourceExhausted, "more than \(limit) calls are open on this connection"))
            return .opened
        }
        server.inFlight.add(1, ordering: .relaxed)
        serving.callStarted()
        if let deadline = head.deadline {
            serving.watch(deadline, of: id, serial: serial, method: head.method, in: self)
        }
        if incoming.answersAtOnce {
            // Health, reflection and stats answer at once, here on the loop (they never wait), rather
            // than queueing behind domain calls that may hold every worker.
            call.run()
        } else {
            starting.append(call)
            if starting.count >= Self.startBatch { startQueued() }
        }
        if stream.isBackedUp { stream.pauseReading() }
        return .opened
    }

    /// Why another upload may not open now: the replica's or this client's uploads are at their limit.
    private func uploadRefusal() -> RPCError? {
        let limits = server.limits
        if server.uploadsOpen.load(ordering: .relaxed) >= limits.maxUploads {
            return RPCError(
                .resourceExhausted, "too many uploads in progress (\(limits.maxUploads) on this replica); retry later")
        }
        if server.uploadsOpen(from: peerHost) >= limits.maxUploadsPerPeer {
            return RPCError(
                .resourceExhausted,
                "too many uploads in progress from \(peerHost) (\(limits.maxUploadsPerPeer)); finish or cancel one first"
            )
        }
        return nil
    }

    /// Answers call `id`, which is not opened, with `error` at once; the server counts it.
    package func refuse(_ id: UInt64, _ head: CallHead, _ error: RPCError) {
        refuse(id, server.rpc.accept(head), error)
    }

    private func refuse(_ id: UInt64, _ call: IncomingCall, _ error: RPCError) {
        call.answered(error.code)
        wire.writeStatus(id, message: nil, error: error)
    }

    /// Runs `job` on the workers in this connection's queue, counted in flight until `jobEnded` (any thread).
    package func run(_ job: any WorkerJob) {
        server.inFlight.add(1, ordering: .relaxed)
        server.workers.submit(job, to: queue)
    }

    package func jobEnded() { server.inFlight.subtract(1, ordering: .releasing) }

    /// Hands the calls opened since the last time to the worker pool: the protocol's reader calls it
    /// when it decoded what one read brought.
    package func startQueued() {
        guard !starting.isEmpty else { return }
        server.workers.submit(starting, to: queue)
        starting.removeAll(keepingCapacity: true)
    }

    /// The requests of client-streaming call `id`; its consumer's reads grant the client credit.
    private func makeInbox(
        _ id: UInt64, _ call: IncomingCall, decoding: (@Sendable ([UInt8]) throws(RPCError) -> [UInt8])?
    ) -> MessageInbox {
        MessageInbox(maxMessageSize: call.requestLimit(within: server.limits.maxMessageSize), decoding: decoding) {
            [weak self] bytes in
            self?.wire.writeRequestCredit(id, bytes: bytes)
        }
    }

    /// A request message (or a chunk of one, `continues`) of call `id`: into its inbox. Messages of a
    /// call that is over are dropped (the client may not have seen its status yet), as HTTP/2 drops
    /// DATA on a closed stream; one the inbox refuses (too large, over its credit) ends the call.
    package func receiveMessage(_ id: UInt64, _ chunk: [UInt8], continues: Bool) {
        guard
            let (serial, inbox) = calls.withLock({ calls -> (UInt64, MessageInbox)? in
                guard let entry = calls[id], let inbox = entry.inbox else { return nil }
                if entry.pace != nil {
                    entry.pace!.windowBytes += chunk.count
                    if !continues { entry.pace!.lastMessageAt = .now }
                }
                return (entry.serial, inbox)
            })
        else { return }
        do {
            try inbox.receive(chunk: chunk, continues: continues)
        } catch {
            end(id, serial: serial, error: error.error)
        }
    }

    /// The client sent call `id`'s last request.
    package func endRequests(_ id: UInt64) {
        calls.withLock { calls -> MessageInbox? in
            guard let entry = calls[id] else { return nil }
            entry.pace = nil
            return entry.inbox
        }?.finish()
    }

    /// "30 s", or "500 ms" under a second.
    package static func spoken(_ duration: Duration) -> String {
        duration < .seconds(1) ? "\(Int(duration.seconds * 1000)) ms" : "\(Int(duration.seconds)) s"
    }

    /// Ends the uploads silent for `uploadIdleTimeout`, or slower than `uploadMinimumRate` over the
    /// window that just closed, DEADLINE_EXCEEDED; their handlers are cancelled and what they were
    /// sent is discarded (loop thread, from the sweeper).
    package func endStalledUploads(now: ContinuousClock.Instant) {
        let limits = server.limits
        let stalled = calls.withLock { calls -> [(UInt64, UInt64, RPCError)] in
            var stalled: [(UInt64, UInt64, RPCError)] = []
            for (id, entry) in calls {
                guard let pace = entry.pace else { continue }
                if let inbox = entry.inbox, inbox.bufferedBytes > 0 {
                    // The handler is behind, not the client (which may be out of credit): its pace
                    // counts from when the handler catches up.
                    entry.pace = UploadPace(lastMessageAt: now, windowStart: now)
                    continue
                }
                if now - pace.lastMessageAt > limits.uploadIdleTimeout {
                    stalled.append(
                        (
                            id, entry.serial,
                            RPCError(
                                .deadlineExceeded,
                                "upload abandoned: no message for \(Self.spoken(limits.uploadIdleTimeout)); nothing it sent was kept"
                            )
                        ))
                } else if now - pace.windowStart >= limits.uploadRateWindow {
                    let rate = Double(pace.windowBytes) / (now - pace.windowStart).seconds
                    if rate < Double(limits.uploadMinimumRate) {
                        stalled.append(
                            (
                                id, entry.serial,
                                RPCError(
                                    .deadlineExceeded,
                                    "upload too slow: \(Int(rate)) bytes/s over the last \(Self.spoken(limits.uploadRateWindow)), under the "
                                        + "minimum of \(limits.uploadMinimumRate); nothing it sent was kept")
                            ))
                    } else {
                        entry.pace = UploadPace(lastMessageAt: pace.lastMessageAt, windowStart: now)
                    }
                }
            }
            return stalled
        }
        for (id, serial, error) in stalled { end(id, serial: serial, error: error) }
    }

    /// The client read `bytes` of call `id`'s responses: its handler may send as many more.
    package func grantResponseCredit(_ id: UInt64, bytes: Int) {
        responseWindow(id, serial: nil)?.grant(bytes)
    }

    /// The client cancelled call `id`: a queued call is dropped (never run) and its id free again,
    /// a running one's handler is cancelled. False when no call `id` is open.
    @discardableResult
    package func cancel(_ id: UInt64) -> Bool {
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
                    entry.cancelledByClient = true
                    cancelledCalls.add(1, ordering: .relaxed)
                }
                entry.call.cancel()
                if case .running(let task) = entry.slot { return (true, task) }
                return (true, nil)
            }
        }
        task?.cancel()
        return known
    }

    /// Cancels every open call (the connection is failing or closed): queued ones are dropped and
    /// never run, running ones are cancelled; none is answered (a failing connection is sealed). Loop thread.
    package func cancelAll() { _ = cancelAllCalls() }

    /// `cancelAll`, returning the open calls left: those with a handler still to finish.
    private func cancelAllCalls() -> [ServerCallEntry] {
        let (running, left) = calls.withLock { calls -> ([Task<Void, Never>], [ServerCallEntry]) in
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

    // MARK: Call lifecycle

    /// Ends call `id` from the server's side before its handler did: answers `error` now and
    /// cancels the handler (deadline passed, flow control broken). Loop thread.
    package func end(_ id: UInt64, serial: UInt64, error: RPCError) {
        stream.loop.assertInLoop()
        let entry = calls.withLock { calls -> ServerCallEntry? in
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
        wire.writeStatus(id, message: nil, error: error)
    }

    /// Ends open call `id` (whichever its serial) from the server's side, as `end(_:serial:error:)`.
    package func end(_ id: UInt64, error: RPCError) {
        guard let serial = calls.withLock({ $0[id]?.serial }) else { return }
        end(id, serial: serial, error: error)
    }

    /// A worker is about to run the call: true when it is still queued (not ended while it
    /// waited: cancelled, expired, its connection gone), in which case the caller must report its
    /// task with `running`.
    package func claim(_ id: UInt64, serial: UInt64) -> Bool {
        calls.withLock { calls -> Bool in
            guard let (entry, _) = entry(id, serial: serial, in: calls), case .queued = entry.slot else { return false }
            entry.slot = .claimed
            return true
        }
    }

    /// The claimed call's handler runs (or ran) in `task`; cancels it when the call was ended
    /// meanwhile (its flag is set under the lock that also guards the slot).
    package func running(_ call: ServerCall, task: Task<Void, Never>) {
        calls.withLock { calls in
            guard let (entry, _) = entry(call.id, serial: call.serial, in: calls), case .claimed = entry.slot else {
                return
            }  // over already
            entry.slot = .running(task)
        }
        if call.isCancelled { task.cancel() }
    }

    /// Called by a call's sink when it finished; only the first answer of a call is written (a
    /// call that expired was answered already), and only then is this true (the server counts it).
    package func finished(_ id: UInt64, serial: UInt64, message: [UInt8]?, error: RPCError?) -> Bool {
        let open = calls.withLock { calls -> Bool in
            guard let (_, index) = entry(id, serial: serial, in: calls) else { return false }
            answering.add(1, ordering: .relaxed)
            remove(at: index, &calls)
            return true
        }
        guard open else { return false }  // ended already (answered, or its connection gone)
        // Queued before the call stops counting as in flight, so a shutdown waiting for that writes it.
        wire.writeStatus(id, message: message, error: error)
        answering.subtract(1, ordering: .releasing)
        server.inFlight.subtract(1, ordering: .releasing)
        return true
    }

    /// Whether call `id` may still send: it is open (not answered because of its deadline).
    package func isOpen(_ id: UInt64, serial: UInt64) -> Bool {
        calls.withLock { calls in entry(id, serial: serial, in: calls) != nil }
    }

    /// The credit window of open call `id` (of that serial, when given) for its response
    /// messages, made on first use; nil once the call is over.
    package func responseWindow(_ id: UInt64, serial: UInt64?) -> SendWindow? {
        calls.withLock { calls in
            guard let entry = calls[id], serial.map({ $0 == entry.serial }) ?? true else { return nil }
            if let window = entry.window { return window }
            let window = SendWindow()
            entry.window = window
            return window
        }
    }

    // MARK: Back-pressure and closing

    /// Waits while the client has more unread response bytes than the high-water mark; throws once
    /// the connection closed or the call's task is cancelled (client cancel, deadline).
    package func waitUntilWritable() async throws {
        guard stream.isBackedUp else { return }
        let ticket = writers.withLock { writers in
            writers.lastTicket += 1
            return writers.lastTicket
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow = writers.withLock { writers -> (any Error)?? in
                    if writers.closed { return .some(RPCError(.cancelled, "connection closed")) }
                    if Task.isCancelled { return .some(CancellationError()) }
                    if stream.unwrittenBytes <= stream.lowWater { return .some(nil) }
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
        stream.resumeReading()
    }

    /// The connection closed: queued calls are dropped (the pool forgets their jobs), running ones
    /// cancelled, waiting writers and streams fail (loop thread).
    package func closed(reason: String) {
        stream.loop.assertInLoop()
        let error = RPCError(.cancelled, "connection closed: \(reason)")
        let streams = cancelAllCalls().filter { $0.window != nil || $0.inbox != nil }
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
}

private enum Admission {
    case accepted, idInUse, tooMany
}

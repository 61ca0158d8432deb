import Base
import CLibUV
import Foundation
import Synchronization

/// A libuv event loop running on a thread of its own. Every libuv handle of a loop is touched only
/// on that thread; other threads hand it work with `execute`, which wakes the loop.
public final class EventLoop: @unchecked Sendable {
    /// The loop client connections of this process share.
    public static let shared = EventLoop(name: "client-loop")

    package let raw: UnsafeMutablePointer<uv_loop_t>
    private let wakeup: UnsafeMutablePointer<uv_async_t>
    private let queue = Lock<(work: [@Sendable () -> Void], stopped: Bool)>(([], false))
    private let finished = DispatchSemaphore(value: 0)
    /// Work taken from `queue` and being run (loop thread only).
    private var draining: [@Sendable () -> Void] = []
    /// Scratch space every read on this loop lands in before it is parsed (loop thread only).
    package let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
    /// What one turn of the loop may do, so that no client can make a turn long: every connection's
    /// reads and writes wait while a turn runs, health checks included. Reset after each turn's I/O
    /// callbacks by the check handle `nextTurn`, which also restarts what was put off to the next turn.
    private var thisTurn = TurnCounters()
    package struct TurnCounters {
        /// Bytes read; once `turnReadBudget` is spent, each further read gets `minimumRead` bytes.
        var read = 0
        /// Bytes of large frames read (`turnBulkBudget`).
        var bulk = 0
        /// Connections accepted (`turnAcceptBudget`), and closed as their peers ended (`turnCloseBudget`).
        var accepted = 0
        var closed = 0

        /// Each count raised to `other`'s where that is larger.
        mutating func formMaximum(_ other: TurnCounters) {
            read = max(read, other.read)
            bulk = max(bulk, other.bulk)
            accepted = max(accepted, other.accepted)
            closed = max(closed, other.closed)
        }
    }
    /// The most any one turn has done of each so far (loop thread; tests check the bounds, and
    /// reset it to measure from a point on).
    package var largestTurn = TurnCounters()
    /// libuv reads a readable socket up to 32 times a turn; these bound what a turn reads to about
    /// `turnReadBudget` + `minimumRead` per readable connection, whatever clients send.
    package static let turnReadBudget = 1 << 20
    package static let minimumRead = 16 * 1024
    /// Bytes of large frames (and what closing connections read only to drop) that one turn reads,
    /// over all connections; a connection receiving a large frame reads nothing more in a turn that
    /// spent it. Each 4 KiB copied into a large frame's new buffer costs a page fault: about 5 ms a MiB
    /// on this project's 2-core VM, so 40 uploaders at 16 KiB each made 8 ms turns, and a search
    /// waited two of them (the abuse benchmark's search maximum, 50-200 ms, under 16 MiB frames).
    package static let turnBulkBudget = 256 << 10
    /// Connections one turn accepts; the rest wait in the kernel's queue for the next turn. 875
    /// connections arriving at once took one 36 ms turn (the abuse benchmark's idle sockets).
    package static let turnAcceptBudget = 64
    /// Connections one turn closes for their peers' end; the others wait for the next turn. 591
    /// attacker sockets leaving together took a 10 ms turn.
    package static let turnCloseBudget = 64
    /// Connections that read a full buffer this turn and read again in the next one (see
    /// `TCPConnection.yieldReading`), and other work put off to the next turn.
    private var yielded: [TCPConnection] = []
    private var resuming: [TCPConnection] = []
    private var putOff: [() -> Void] = []
    private let nextTurn: UnsafeMutablePointer<uv_check_t>
    private var nextTurnStarted = false
    /// Runs just before each poll for I/O: measures the turn that ends there (`turns`).
    private let turnEnd: UnsafeMutablePointer<uv_prepare_t>
    private var lastTurnEnd: (at: UInt64, idle: UInt64) = (0, 0)
    /// How long the loop's turns kept it busy; readable from any thread.
    public let turns = LoopTurnFigures()

    public let name: String

    public init(name: String) {
        self.name = name
        raw = allocateHandle(uv_loop_t.self)
        check(uv_loop_init(raw), "uv_loop_init")
        wakeup = allocateHandle(uv_async_t.self)
        check(uv_async_init(raw, wakeup) { handle in EventLoop.owning(handle!.pointee.loop).drain() }, "uv_async_init")
        nextTurn = allocateHandle(uv_check_t.self)
        check(uv_check_init(raw, nextTurn), "uv_check_init")
        // Idle time: what the loop spent waiting in epoll, so that a turn's busy time is its wall
        // time minus that (libuv ≥ 1.39).
        check(uv_loop_configure_idle_time(raw), "uv_loop_configure(UV_METRICS_IDLE_TIME)")
        turnEnd = allocateHandle(uv_prepare_t.self)
        check(uv_prepare_init(raw, turnEnd), "uv_prepare_init")
        check(
            uv_prepare_start(turnEnd) { handle in EventLoop.owning(handle!.pointee.loop).endTurn() }, "uv_prepare_start"
        )
        uv_unref(cast(turnEnd, to: uv_handle_t.self))
        raw.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        let thread = Thread { [self] in
            // Named from the thread itself, so top -H, perf and the abuse benchmark's CPU by thread show
            // it: Foundation's name alone was sometimes lost (the thread showed as a dispatch worker,
            // `…oot.default-qos`; in one zoo start of two, and always for the first of two loops).
            Thread.current.name = name
            _ = menagerie_name_this_thread(name)
            pthread_setspecific(Self.currentKey, Unmanaged.passUnretained(self).toOpaque())
            uv_run(raw, UV_RUN_DEFAULT)
            finished.signal()
        }
        thread.name = name
        thread.start()
    }

    /// Frees what the loop allocated for itself, which `shutdown` closed but nothing freed (each server's loops kept
    /// their 256 KiB read buffer for good). Only a loop that was shut down gets here: until then its thread holds it.
    deinit {
        free(wakeup)
        free(nextTurn)
        free(turnEnd)
        free(raw)
        readBuffer.deallocate()
    }

    /// Runs `work` on the loop thread, soon. Ignored once the loop has shut down.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        queue.withLock { queue in
            guard !queue.stopped else { return }
            queue.work.append(work)
            // Under the lock: once `shutdown` stopped the queue, no wake-up can reach a closed loop.
            uv_async_send(wakeup)
        }
    }

    /// Runs `work` on the loop thread and waits for its result (never call it from the loop thread).
    public func submit<T: Sendable>(_ work: @escaping @Sendable () -> T) -> T {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<T?>(nil)
        execute {
            let value = work()
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }

    /// Runs the work handed over so far, then closes every handle still open, stops the loop
    /// thread and waits for it. Work handed over later is ignored; calling it again returns at once.
    public func shutdown() {
        let first = queue.withLock { queue -> Bool in
            guard !queue.stopped else { return false }
            queue.stopped = true
            queue.work.append { [self] in
                uv_walk(
                    raw,
                    { handle, _ in
                        if uv_is_closing(handle) == 0 { uv_close(handle, nil) }
                    }, nil)
            }
            uv_async_send(wakeup)
            return true
        }
        guard first else { return }
        finished.wait()
        uv_loop_close(raw)
    }

    private func drain() {
        // Swapping with an empty array keeps both buffers' capacity: no allocation per wake-up.
        queue.withLock { swap(&$0.work, &draining) }
        for item in draining { item() }
        draining.removeAll(keepingCapacity: true)
    }

    /// How many bytes the next read may take, for a connection receiving a large frame (`bulk`) or
    /// not; 0 when a bulk read has to wait for the next turn (loop thread).
    package func readSize(bulk: Bool) -> Int {
        let left = Self.turnReadBudget - thisTurn.read
        let size = left >= readBuffer.count ? readBuffer.count : max(Self.minimumRead, left)
        return bulk ? max(0, min(size, Self.turnBulkBudget - thisTurn.bulk)) : size
    }

    /// Counts `bytes` read on this turn (loop thread).
    package func didRead(_ bytes: Int, bulk: Bool) {
        startNextTurnCheck()
        thisTurn.read += bytes
        if bulk { thisTurn.bulk += bytes }
    }

    /// Counts an accept on this turn; false when the turn accepted its share (loop thread).
    package func mayAccept() -> Bool { takeShare(of: \.accepted, budget: Self.turnAcceptBudget) }

    /// Counts a close on this turn; false when the turn closed its share (loop thread).
    package func mayClose() -> Bool { takeShare(of: \.closed, budget: Self.turnCloseBudget) }

    private func takeShare(of count: WritableKeyPath<TurnCounters, Int>, budget: Int) -> Bool {
        startNextTurnCheck()
        guard thisTurn[keyPath: count] < budget else { return false }
        thisTurn[keyPath: count] += 1
        return true
    }

    /// Has `connection` read again after this turn's I/O callbacks (loop thread).
    package func readAgainNextTurn(_ connection: TCPConnection) {
        startNextTurnCheck()
        yielded.append(connection)
    }

    /// Runs `work` after this turn's I/O callbacks, when the turn's counters start again (loop thread).
    package func afterThisTurn(_ work: @escaping () -> Void) {
        startNextTurnCheck()
        putOff.append(work)
    }

    private func startNextTurnCheck() {
        guard !nextTurnStarted else { return }
        nextTurnStarted = true
        uv_check_start(nextTurn) { handle in EventLoop.owning(handle!.pointee.loop).startNextTurn() }
    }

    private func startNextTurn() {
        uv_check_stop(nextTurn)
        nextTurnStarted = false
        largestTurn.formMaximum(thisTurn)
        thisTurn = TurnCounters()
        swap(&yielded, &resuming)
        for connection in resuming { connection.resumeAfterYield() }
        resuming.removeAll(keepingCapacity: true)
        let work = putOff
        putOff.removeAll()
        for item in work { item() }
    }

    /// A turn of the loop ends: its busy time is the time since the previous turn ended, less the
    /// time spent waiting for I/O in between (loop thread). Two clock reads per turn.
    private func endTurn() {
        let now = uv_hrtime(), idle = uv_metrics_idle_time(raw)
        if lastTurnEnd.at != 0 {
            let elapsed = now &- lastTurnEnd.at, waited = idle &- lastTurnEnd.idle
            turns.record(busyNanoseconds: elapsed > waited ? elapsed - waited : 0)
        }
        lastTurnEnd = (now, idle)
    }

    /// Whether the calling thread is this loop's thread.
    package var inLoop: Bool {
        pthread_getspecific(Self.currentKey) == Unmanaged.passUnretained(self).toOpaque()
    }

    /// Stops a debug build when called off this loop's thread, as swift-nio's
    /// `preconditionInEventLoop` does: backs the "(loop thread)" of a doc comment. Costs nothing in
    /// release builds.
    @inline(__always)
    package func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inLoop, "called off the thread of event loop \(name)", file: file, line: line)
    }

    private static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    package static func owning(_ loop: UnsafeMutablePointer<uv_loop_t>?) -> EventLoop {
        Unmanaged<EventLoop>.fromOpaque(loop!.pointee.data).takeUnretainedValue()
    }
}

/// Zeroed memory for a libuv handle or request, released with `free` (see `closeHandle`).
package func allocateHandle<T>(_ type: T.Type) -> UnsafeMutablePointer<T> {
    calloc(1, MemoryLayout<T>.size)!.assumingMemoryBound(to: T.self)
}

/// Views a concrete handle (`uv_tcp_t`, `uv_timer_t`, ...) as one of its libuv "base classes".
package func cast<From, To>(_ pointer: UnsafeMutablePointer<From>, to: To.Type) -> UnsafeMutablePointer<To> {
    UnsafeMutableRawPointer(pointer).assumingMemoryBound(to: To.self)
}

/// Closes a handle whose `data` holds a retained owner (or nil): releases the owner and frees the
/// handle's memory once libuv is done with it.
package func closeHandle<H>(_ handle: UnsafeMutablePointer<H>) {
    let base = cast(handle, to: uv_handle_t.self)
    guard uv_is_closing(base) == 0 else { return }
    uv_close(base) { handle in
        if let owner = handle?.pointee.data { Unmanaged<AnyObject>.fromOpaque(owner).release() }
        free(handle)
    }
}

/// Crashes with libuv's message when a call that cannot fail in a correct program fails.
package func check(_ result: Int32, _ call: String) {
    precondition(result == 0, "\(call) failed: \(uvError(result))")
}

/// libuv's name and message for an error code: `ECONNREFUSED (connection refused)`.
package func uvError(_ code: Int32) -> String {
    "\(String(cString: uv_err_name(code))) (\(String(cString: uv_strerror(code))))"
}

/// A libuv timer that runs a closure on the loop thread; touched on that thread only.
package final class LoopTimer: @unchecked Sendable {
    private let handle: UnsafeMutablePointer<uv_timer_t>
    private let action: () -> Void

    /// Creates a stopped timer; call on the loop thread.
    package init(loop: EventLoop, action: @escaping () -> Void) {
        self.action = action
        handle = allocateHandle(uv_timer_t.self)
        uv_timer_init(loop.raw, handle)
        handle.pointee.data = Unmanaged.passRetained(self as AnyObject).toOpaque()
    }

    /// Fires after `delay`, then every `interval` when given.
    package func start(after delay: Duration, every interval: Duration? = nil) {
        uv_timer_start(
            handle,
            { handle in
                (Unmanaged<AnyObject>.fromOpaque(handle!.pointee.data).takeUnretainedValue() as! LoopTimer).action()
            }, delay.millisecondsRoundedUp, interval?.millisecondsRoundedUp ?? 0)
    }

    package func stop() { uv_timer_stop(handle) }

    /// Stops the timer for good and frees it.
    package func close() { closeHandle(handle) }
}

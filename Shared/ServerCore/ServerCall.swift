import RPC
import ServerSeam
import Synchronization

/// A call's entry in its table, from the moment its request arrived until its status was sent.
///
/// Not nested in `ServerCallTable`, and holding its call by its base class, from when the table was generic over its
/// wire, for the reason `UploadPace` is not: a type nested in a generic class is generic too, and the table's
/// dictionary of entries reached the entry's metadata through the runtime's generic metadata cache four times a call. A class, changed in
/// place under the table's lock: a struct was copied out of the dictionary (and its references retained) at each
/// of the three reads of every call, and hashed again to be changed.
package final class ServerCallEntry {
    package let serial: UInt64
    /// The call itself, whose flag tells a handler not yet known by its task that it is over.
    package let call: ServerCallState
    package var slot: CallSlot
    /// Credit for the call's response messages, made when first needed (the first streamed
    /// response or credit granted), so unary calls never make one.
    package var window: SendWindow?
    /// The requests of a client-streaming or bidirectional call.
    package let inbox: MessageInbox?
    /// The client cancelled it while its handler ran: it no longer counts against the limit of
    /// concurrent calls (the client stopped counting it when it sent the cancel).
    package var cancelledByClient = false
    /// An upload's pace while its requests come; nil for other calls and once they ended.
    package var pace: UploadPace?
    /// An upload (counted in the server's `uploadsOpen` until its entry goes).
    package var isUpload = false

    package init(serial: UInt64, call: ServerCallState, slot: CallSlot, inbox: MessageInbox?) {
        self.serial = serial
        self.call = call
        self.slot = slot
        self.inbox = inbox
    }
}

/// What an upload sent lately: the sweeper ends one silent for `uploadIdleTimeout`, or that sent
/// less than `uploadMinimumRate` over a `uploadRateWindow` (as nginx's `client_body_timeout` and
/// a minimum data rate do for bodies), so open uploads cannot hold a replica's connections.
///
/// Not nested in `ServerCallTable`: when the table was generic over its wire, a type nested there was generic too,
/// and every call's entry reached its metadata (and `Optional`'s of it) through the runtime's generic metadata cache,
/// nine times a call, about 7,000 instructions of a 64-byte call's 51,000 on the server (callgrind).
package struct UploadPace {
    package var lastMessageAt: ContinuousClock.Instant
    package var windowStart: ContinuousClock.Instant
    package var windowBytes = 0
}

package enum CallSlot {
    /// Waiting for a worker: its job is in the table's queue (or `starting`). Ending such a call
    /// removes its entry at once, and the worker that takes the job finds nothing to run.
    case queued
    /// A worker runs its handler, which has not suspended yet, so its task is not known here
    /// (`Task.immediate` returns it at the first suspension): ending the call sets its flag
    /// (`ServerCall.cancel`), which `ServerContext.checkAlive` sees, and `running` cancels the
    /// task once it is known.
    case claimed
    /// Its handler runs (or waits) in this task.
    case running(Task<Void, Never>)
}

/// What the server's deadline timer needs of a connection's calls, whatever their protocol.
package protocol CallDeadlines: AnyObject {
    func isOpen(_ id: UInt64, serial: UInt64) -> Bool
    func end(_ id: UInt64, serial: UInt64, error: RPCError)
}

/// What a call's table needs of it, whatever its protocol: its flag and how it was accepted (the base class of
/// `ServerCall`, which the table's entries hold; see `ServerCallEntry`).
package class ServerCallState: @unchecked Sendable {
    /// Set when the call ended before its handler did (see `CallSlot.claimed`).
    private let cancelled = Atomic<Bool>(false)
    package final let id: UInt64
    package final let serial: UInt64
    /// The call as the server accepted it: what serves it, and where the transport reports answering it.
    package final let incoming: IncomingCall
    package final let input: CallInput

    package init(id: UInt64, serial: UInt64, incoming: IncomingCall, input: CallInput) {
        self.id = id
        self.serial = serial
        self.incoming = incoming
        self.input = input
    }

    package final var workerTime: WorkerTime? { incoming.workerTime }

    /// Tells the handler its call is over (its client cancelled or left, its deadline passed).
    package final func cancel() { cancelled.store(true, ordering: .releasing) }

    package final var isCancelled: Bool { cancelled.load(ordering: .acquiring) }
}

/// A call on its way through the server: queued on the worker pool (or run at once, for
/// built-ins), then served by its handler in a task of its own.
package final class ServerCall: ServerCallState, WorkerJob, @unchecked Sendable {
    package let table: ServerCallTable

    package init(table: ServerCallTable, id: UInt64, serial: UInt64, incoming: IncomingCall, input: CallInput) {
        self.table = table
        super.init(id: id, serial: serial, incoming: incoming, input: input)
    }

    /// Runs the handler right here, until it first waits, unless the call was cancelled or
    /// expired while it was queued.
    @discardableResult
    package func run() -> Bool {
        guard table.claim(id, serial: serial) else { return false }
        let task = Task.immediate { [self] in
            await incoming.serve(input, responses: CallResponseSink(call: self))
        }
        table.running(self, task: task)
        return true
    }
}

/// Writes one call's responses through its wire: each message within the call's credit (cut into
/// chunks when larger than `FlowControl.maxChunk` or the credit), and within the stream's
/// high-water mark.
package struct CallResponseSink: ResponseSink {
    package let call: ServerCall

    package var isCancelled: Bool { call.isCancelled }

    package func send(_ message: [UInt8]) async throws {
        let table = call.table
        guard let window = table.responseWindow(call.id, serial: call.serial) else {
            throw RPCError(.cancelled, "call \(call.id) is over")
        }
        try await window.send(message) { [call] chunk, continues in
            try await table.waitUntilWritable()
            guard table.isOpen(call.id, serial: call.serial) else {
                throw RPCError(.cancelled, "call \(call.id) is over")
            }
            table.wire.writeMessage(call.id, chunk, continues: continues)
            if !table.wire.clientGrantsResponseCredit { window.grant(FlowControl.cost(chunk.count)) }
        }
    }

    package func finish(message: [UInt8]?, error: RPCError?) -> Bool {
        call.table.finished(call.id, serial: call.serial, message: message, error: error)
    }
}

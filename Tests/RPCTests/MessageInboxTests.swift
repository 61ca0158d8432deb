import RPC
import Synchronization
import Testing

/// The receiving side's flow control: what a call's inbox may hold whatever its sender does.
@Suite struct MessageInboxTests {
    /// Credit granted back, as the sender would receive it.
    final class Grants: Sendable {
        let total = Mutex(0)
        func grant(_ bytes: Int) { total.withLock { $0 += bytes } }
    }

    /// Chunks of a message behind queued ones hold their credit: before, each chunk's credit went back
    /// at once, so a sender could queue message after message (2 MiB behind a 1 MiB window).
    @Test func chunksBehindQueuedMessagesHoldTheirCreditUntilTheConsumerTakesThem() async throws {
        let grants = Grants()
        let window = 1 << 20
        let inbox = MessageInbox(window: window) { grants.grant($0) }
        let chunk = [UInt8](repeating: 1, count: 200 << 10)
        var available = window
        var sent = 0
        // The sender sends what its credit allows: 256 KiB messages as a 200 KiB chunk and a 56 KiB one.
        func send(_ bytes: [UInt8], continues: Bool) throws -> Bool {
            let cost = FlowControl.cost(bytes.count)
            available += grants.total.withLock { total in
                defer { total = 0 }
                return total
            }
            guard cost <= available else { return false }
            try inbox.receive(chunk: bytes, continues: continues)
            available -= cost
            return true
        }
        sending: while sent < 20 {
            guard try send(chunk, continues: true) else { break sending }
            guard try send([UInt8](repeating: 2, count: 56 << 10), continues: false) else { break sending }
            sent += 1
        }
        #expect(sent <= 4, "\(sent) messages of 256 KiB queued behind a 1 MiB window")
        #expect(inbox.bufferedBytes <= window + 2 * FlowControl.messageOverhead * 4)
        // The consumer takes them: the sender may go on, and every message arrives whole.
        var taken = 0
        while taken < sent {
            let message = try await inbox.next()
            #expect(message?.count == 256 << 10)
            taken += 1
        }
        #expect(try send(chunk, continues: true))
    }

    /// A message larger than the window still completes when it is the next to be taken.
    @Test func aMessageLargerThanTheWindowCompletesAtTheHead() async throws {
        let grants = Grants()
        let inbox = MessageInbox(window: 64 << 10) { grants.grant($0) }
        for _ in 0..<7 { try inbox.receive(chunk: [UInt8](repeating: 3, count: 32 << 10), continues: true) }
        #expect(grants.total.withLock { $0 } > 0)
        try inbox.receive(chunk: [1], continues: false)
        #expect(try await inbox.next()?.count == 7 * (32 << 10) + 1)
    }
}

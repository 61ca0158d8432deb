import Base
import TCP

/// Our binary framing on a byte stream: cuts it into frames (`FrameDecoder`), asks the server's
/// memory budget before making room for a large one, and remembers when frames came, which the
/// server's sweeper reads to tell a stalled or idle client. Generic over its stream, so that
/// checking the stream between frames is a direct call.
package final class FrameReader<Stream: ByteStream>: ConnectionReader {
    private unowned let connection: Stream
    private let decoder: FrameDecoder
    /// A complete frame's envelope bytes arrived; they are valid only during the call.
    package var onFrame: ((UnsafeRawBufferPointer) -> Void)?
    /// The frames of one read were handed to `onFrame`.
    package var onFramesEnd: (() -> Void)?
    /// The byte stream broke framing; the connection closes right after, unless this has it close
    /// once flushed (`close(afterFlushing:)`).
    package var onFrameError: ((FrameError) -> Void)?
    /// When the last complete frame arrived, and since when bytes of an unfinished one have waited.
    private(set) var lastFrameAt: ContinuousClock.Instant?
    private(set) var partialFrameSince: ContinuousClock.Instant?
    package private(set) var budgetedBytes = 0

    /// A reader of `connection`'s frames; it reads once it is the connection's `reader`. A
    /// connection with a memory budget (a server's) must have it before this is made.
    package init(_ connection: Stream, maxFrameSize: Int) {
        self.connection = connection
        decoder = FrameDecoder(maxFrameSize: maxFrameSize)
        if let budget = connection.budget {
            decoder.admitLargeFrame = { [unowned self] length in
                guard budget.reserve(length) else { return false }
                budgetedBytes = length
                return true
            }
        }
    }

    package var readsInBulk: Bool { decoder.isReceivingLargeFrame }

    package func releaseBudget() {
        guard budgetedBytes > 0 else { return }
        connection.budget?.release(budgetedBytes)
        budgetedBytes = 0
    }

    package func received(_ bytes: UnsafeRawBufferPointer) {
        decoder.append(bytes)
        cutFrames()
    }

    /// The rest of a large frame is read straight into the decoder's buffer, where it was reserved: one copy of a
    /// 64 KiB payload less on its way in (from the loop's read buffer into the decoder's).
    package func readDestination() -> UnsafeMutableRawBufferPointer? {
        decoder.roomForRestOfFrame(atLeast: Self.smallestDirectRead)
    }

    package func receivedInPlace(_ count: Int) {
        decoder.didAppendInPlace(count)
        cutFrames()
    }

    /// Below this many bytes of a frame still to come, reads go to the loop's buffer: one read may then carry this
    /// frame's end and many small frames after it, and copying a few KiB costs less than a second read.
    package static var smallestDirectRead: Int { 16 * 1024 }

    private func cutFrames() {
        var frames = 0
        defer { if frames > 0 { onFramesEnd?() } }
        do {
            defer { if frames > 0 { lastFrameAt = .now } }
            while !connection.isClosed, !connection.isClosing, let envelope = try decoder.nextEnvelope() {
                frames += 1
                releaseBudget()
                onFrame?(envelope)
            }
        } catch {
            onFrameError?(error)
            if !connection.isClosing { connection.close(reason: error.description) }
            return
        }
        if decoder.hasPartialFrame {
            // After a complete frame, what waits is the beginning of the next one.
            if partialFrameSince == nil || frames > 0 { partialFrameSince = .now }
        } else {
            partialFrameSince = nil
        }
    }
}

extension ByteStream {
    /// Reads this stream as our frames from now on (clients, and the raw benchmark floor);
    /// returns the reader, whose `onFrame` gets them.
    package func readFrames(maxFrameSize: Int = FrameCodec.defaultMaxFrameSize) -> FrameReader<Self> {
        let frames = FrameReader(self, maxFrameSize: maxFrameSize)
        reader = frames
        return frames
    }
}

import ClassificationAPI
import ClassificationCore
import Foundation
import RPC
import Synchronization

/// A live camera sends frames faster than a detector may run. Queuing them would make every answer later than the
/// last; `DetectStream` keeps only the newest frame waiting (latest wins) and counts the ones it overtook, so an
/// answer is never more than one detection behind the camera.
extension ClassificationService {
    public func detectStream(
        requests: RequestStream<ClassificationV1.DetectStreamRequest>,
        response: ResponseWriter<ClassificationV1.DetectStreamResponse>, context: ServerContext
    ) async throws {
        let mailbox = LatestFrameMailbox()
        let store = store, cache = cache, pixelLimit = limits.pixelLimit
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Reads frames as they come, whatever the detector is doing, so the client is never held up by it.
            group.addTask {
                do {
                    var arrived: UInt64 = 0
                    for try await message in requests {
                        arrived += 1
                        guard let request = message.request else {
                            throw RPCError(
                                .invalidArgument,
                                "frame \(arrived): request missing; send a DetectRequest with the frame's image")
                        }
                        // Settings are checked at once; a bad one ends the stream, as it would fail every frame.
                        let plan = try RequestValidation.detect(request)
                        mailbox.put(
                            LatestFrameMailbox.Frame(
                                number: message.frame == 0 ? arrived : message.frame, plan: plan,
                                arrived: ContinuousClock.now))
                    }
                    mailbox.finish(nil)
                } catch {
                    mailbox.finish(error)
                    throw error
                }
            }
            group.addTask {
                var droppedTotal: UInt64 = 0
                while let (frame, dropped) = try await mailbox.take() {
                    droppedTotal += dropped
                    let (result, error) = try await inference(decoding: frame.plan.image) {
                        try Self.detect(frame.plan, store: store, cache: cache, pixelLimit: pixelLimit, lenient: true)
                    }
                    var answer = ClassificationV1.DetectStreamResponse()
                    answer.frame = frame.number
                    answer.result = result
                    answer.dropped = dropped
                    answer.droppedTotal = droppedTotal
                    let elapsed = ContinuousClock.now - frame.arrived
                    answer.serverMs =
                        Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
                    if let error { answer.error = error }
                    try await response.send(answer)
                }
            }
            try await group.waitForAll()
        }
    }
}

/// One slot for the newest frame not yet taken by the detector: a frame put while another waits replaces it (the
/// older is dropped and counted). `take` waits for a frame and answers nil once the requests ended and the slot
/// is empty — the last frame is always answered — or throws how they ended.
final class LatestFrameMailbox: Sendable {
    struct Frame: Sendable {
        var number: UInt64
        var plan: RequestValidation.Detection
        var arrived: ContinuousClock.Instant
    }

    private struct State {
        var waiting: Frame?
        var dropped: UInt64 = 0
        var ended = false
        var failure: (any Error)?
        var taker: CheckedContinuation<(Frame, UInt64)?, any Error>?
    }

    private let state = Mutex(State())

    func put(_ frame: Frame) {
        let resume = state.withLock { state -> (CheckedContinuation<(Frame, UInt64)?, any Error>, UInt64)? in
            if let taker = state.taker {
                state.taker = nil
                let dropped = state.dropped
                state.dropped = 0
                return (taker, dropped)
            }
            if state.waiting != nil { state.dropped += 1 }
            state.waiting = frame
            return nil
        }
        if let (taker, dropped) = resume { taker.resume(returning: (frame, dropped)) }
    }

    /// No more frames: `error` nil when the client half-closed.
    func finish(_ error: (any Error)?) {
        let taker = state.withLock { state -> CheckedContinuation<(Frame, UInt64)?, any Error>? in
            state.ended = true
            state.failure = error
            defer { state.taker = nil }
            return state.taker
        }
        if let error { taker?.resume(throwing: error) } else { taker?.resume(returning: nil) }
    }

    func take() async throws -> (Frame, UInt64)? {
        try await withCheckedThrowingContinuation { continuation in
            let now = state.withLock { state -> Result<(Frame, UInt64)?, any Error>? in
                if let failure = state.failure { return .failure(failure) }
                if let frame = state.waiting {
                    state.waiting = nil
                    defer { state.dropped = 0 }
                    return .success((frame, state.dropped))
                }
                if state.ended { return .success(nil) }
                state.taker = continuation
                return nil
            }
            if let now { continuation.resume(with: now) }
        }
    }
}

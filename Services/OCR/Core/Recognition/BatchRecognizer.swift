import Foundation
import Synchronization
import WorkLane

/// One file of a batch and what became of it.
public struct BatchFile: Sendable {
    public var name: String
    public var data: Data

    public init(name: String, data: Data) {
        self.name = name
        self.data = data
    }
}

/// Recognises many images in parallel on the lane for heavy work, from a job already running on one of its threads.
///
/// The job's own thread reads files one after another, and helpers queued on the lane (up to its thread count)
/// take the next unread file when a thread frees up. The job never waits for a helper to start, only for the
/// ones that started to finish their file, so batches cannot deadlock the lane when every thread runs one: a
/// helper that never got a thread is cancelled, one that starts after the last file finds nothing to do.
public struct BatchRecognizer: Sendable {
    public let recognizer: TextRecognizer
    public let lane: WorkLane

    public init(recognizer: TextRecognizer, lane: WorkLane) {
        self.recognizer = recognizer
        self.lane = lane
    }

    /// Each file's result or error, in the files' order. `progress(done, total)` is called after each file (from
    /// any of the threads); `isCancelled` is asked before each file, and when it says yes no further file starts
    /// and `CancellationError` is thrown once the running ones are done.
    public func recognize(
        _ files: [BatchFile], options: RecognitionOptions, parallelism: Int? = nil,
        isCancelled: @escaping @Sendable () -> Bool = { false },
        progress: @escaping @Sendable (_ done: Int, _ total: Int) -> Void = { _, _ in }
    ) throws -> [Result<RecognitionResult, OCRError>] {
        try options.validate()
        let batch = Batch(files: files)
        let recognizer = recognizer
        let drain: @Sendable () -> Void = {
            while !isCancelled(), let (index, file) = batch.next() {
                let result: Result<RecognitionResult, OCRError>
                do {
                    result = .success(try recognizer.recognizeBlocking(file.data, options: options))
                } catch let error as OCRError {
                    result = .failure(error)
                } catch {
                    result = .failure(OCRError(.internal, "\(error)"))
                }
                batch.finish(index, result) { done in progress(done, files.count) }
            }
        }
        let helpers = max(0, min(parallelism ?? lane.threads, files.count) - 1)
        var tickets: [WorkLane.Ticket] = []
        for _ in 0..<helpers {
            // A full lane queue only means fewer helpers.
            guard
                let ticket = try? lane.submit({ cancelled in
                    guard !cancelled, batch.enter() else { return }
                    drain()
                    batch.leave()
                })
            else { break }
            tickets.append(ticket)
        }
        drain()
        for ticket in tickets { _ = ticket.cancel() }
        batch.closeAndWait()
        if isCancelled() { throw CancellationError() }
        return batch.results.map { $0 ?? .failure(OCRError(.internal, "the file was not read")) }
    }

    /// The shared state of one batch: the next unread file, results, helpers at work.
    private final class Batch: Sendable {
        private struct State {
            var next = 0
            var done = 0
            var results: [Result<RecognitionResult, OCRError>?]
            var active = 0
            var closed = false
        }
        private let files: [BatchFile]
        private let state: Mutex<State>
        private let idle = DispatchSemaphore(value: 0)

        init(files: [BatchFile]) {
            self.files = files
            state = Mutex(State(results: Array(repeating: nil, count: files.count)))
        }

        func next() -> (Int, BatchFile)? {
            state.withLock { state in
                guard state.next < files.count else { return nil }
                defer { state.next += 1 }
                return (state.next, files[state.next])
            }
        }

        /// Records a file's result and reports how many are done, under the lock so reports arrive in order.
        func finish(_ index: Int, _ result: Result<RecognitionResult, OCRError>, report: (Int) -> Void) {
            state.withLock { state in
                state.results[index] = result
                state.done += 1
                report(state.done)
            }
        }

        /// A helper starts: false once the batch is closed (it then does nothing).
        func enter() -> Bool {
            state.withLock { state in
                guard !state.closed else { return false }
                state.active += 1
                return true
            }
        }

        func leave() {
            let wake = state.withLock { state in
                state.active -= 1
                return state.closed && state.active == 0
            }
            if wake { idle.signal() }
        }

        /// No helper starts any more; returns when the ones that started have left.
        func closeAndWait() {
            let wait = state.withLock { state in
                state.closed = true
                return state.active > 0
            }
            if wait { idle.wait() }
        }

        var results: [Result<RecognitionResult, OCRError>?] { state.withLock { $0.results } }
    }
}

/// Work a service does beside answering calls (a refresh schedule, the jobs it runs) that the service runner
/// starts with the server and stops with it, after swift-service-lifecycle's `Service`. Here, in Base, so
/// a Core or the jobs machinery can offer one without depending on the runner.
///
/// `run()` lasts as long as the service and returns once its task is cancelled: that is how the runner
/// asks it to stop, on SIGTERM or SIGINT, at the same time as it drains the calls in flight. By then it
/// should leave what it was doing recorded (a job ends failed by the shutdown, never RUNNING) and return
/// within the shutdown grace period. Returning or throwing before it is asked to stop is a failure: the
/// runner logs it and stops the whole service with a non-zero exit status, since a replica that quietly
/// lost its refresher or its jobs would look healthy while doing half its work.
public protocol BackgroundService: Sendable {
    /// What the log calls it, e.g. "zoo refresher".
    var name: String { get }

    /// Runs until the task is cancelled, then stops and returns.
    func run() async throws
}

/// Returns once the current task is cancelled: for a background service that has nothing left to do but
/// must not end before the service does.
public func waitUntilCancelled() async {
    while !Task.isCancelled {
        try? await Task.sleep(for: .seconds(3600))
    }
}

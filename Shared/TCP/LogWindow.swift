import Base
import Synchronization

/// Warnings any client can cause at will (a plaintext client on a TLS-only port) are logged once a
/// window per kind, the next line saying how many were left out: a one-second attack of plaintext
/// health checks against a TLS-only zoo wrote 1,092 warning lines before. As failed authentication
/// is logged (`FailedAuthThrottle`), the operator still learns that it happens and how often.
package final class LogWindow: Sendable {
    package let window: Duration
    private let state = Mutex<[String: (began: ContinuousClock.Instant, leftOut: Int)]>([:])

    package init(window: Duration = .seconds(60)) { self.window = window }

    /// Logs `message` at warning level unless a warning of `kind` was logged within the window; then
    /// only counts it.
    package func warning(_ logger: Logger, kind: String, _ message: @autoclosure () -> String) {
        guard let leftOut = admit(kind, at: .now) else { return }
        logger.warning(
            message() + (leftOut > 0 ? " (\(leftOut) more like it since the last such line, not logged)" : ""))
    }

    /// Whether a line of `kind` is logged at `now`: the count left out since the last one, or nil
    /// (left out, and counted).
    package func admit(_ kind: String, at now: ContinuousClock.Instant) -> Int? {
        state.withLock { entries -> Int? in
            if let entry = entries[kind], now - entry.began < window {
                entries[kind]!.leftOut += 1
                return nil
            }
            let leftOut = entries[kind]?.leftOut ?? 0
            entries[kind] = (now, 0)
            return leftOut
        }
    }
}

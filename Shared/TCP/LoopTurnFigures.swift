import RPC
import Synchronization

/// How long an event loop's turns kept it busy: the loop's lag. Every connection's reads and writes
/// wait while a turn runs, health checks included, so a long turn is felt by every client at once;
/// these figures tell such a stall on the server from a slow client or network. Written on the loop
/// thread (one uncontended lock a turn), read from any.
public final class LoopTurnFigures: Sendable {
    /// Turn lengths counted separately: over 1, 10 and 100 ms.
    private static let thresholds: [UInt64] = LoopFigures.thresholdsMilliseconds.map { UInt64($0 * 1e6) }

    private let figures = Mutex(LoopFigures())

    package func record(busyNanoseconds: UInt64) {
        let milliseconds = Double(busyNanoseconds) / 1e6
        figures.withLock { figures in
            figures.turns += 1
            figures.busySeconds += milliseconds / 1000
            figures.longestMilliseconds = max(figures.longestMilliseconds, milliseconds)
            for (index, threshold) in Self.thresholds.enumerated() where busyNanoseconds > threshold {
                figures.turnsOver[index] += 1
            }
        }
    }

    /// The figures so far.
    public var snapshot: LoopFigures { figures.withLock { $0 } }
}

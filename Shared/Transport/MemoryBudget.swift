/// The bytes a server holds for its clients that they control: large frames still arriving and
/// answers written but not yet taken by the client. Touched on the loop thread only.
///
/// A frame of `largeFrame` bytes or more is admitted only when its whole length fits in what is
/// left of the budget (the buffer for it is made when its header arrives); otherwise it is refused
/// with RESOURCE_EXHAUSTED. Answers are not refused (a call that ran has to be answered), but once
/// they take the budget past its limit the connections holding the most are closed.
package final class MemoryBudget {
    /// Frames at least this large count against the budget; smaller ones are bounded by the
    /// connection limit (64 KiB × 1,024 connections = 64 MiB).
    static let largeFrame = 64 << 10
    let limit: Int
    private(set) var used = 0

    init(limit: Int) { self.limit = limit }

    /// Takes `bytes` when they fit.
    package func reserve(_ bytes: Int) -> Bool {
        guard used + bytes <= limit else { return false }
        used += bytes
        return true
    }

    /// Takes `bytes` whether or not they fit; true when the budget is now exceeded.
    func charge(_ bytes: Int) -> Bool {
        used += bytes
        return used > limit
    }

    package func release(_ bytes: Int) { used -= bytes }
}

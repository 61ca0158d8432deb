import Foundation

/// Shows progress of a long operation on standard error (standard output carries only results): a bar redrawn in
/// place on a terminal, plain lines otherwise (a log, a pipe).
public struct ProgressDisplay {
    private let isTerminal: Bool
    private let write: (String) -> Void

    /// Writes to standard error, redrawing when it is a terminal.
    public init() {
        self.init(isTerminal: isatty(STDERR_FILENO) == 1) { text in writeStandardError(text) }
    }

    /// Writes through `write`, for tests.
    public init(isTerminal: Bool, write: @escaping (String) -> Void) {
        self.isTerminal = isTerminal
        self.write = write
    }

    /// Shows `fraction` (0…1) done with a short message.
    public func update(fraction: Double, message: String) {
        let percent = Int((min(max(fraction.isNaN ? 0 : fraction, 0), 1) * 100).rounded())
        if isTerminal {
            let filled = percent * 30 / 100
            let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: 30 - filled)
            write("\r[\(bar)] \(String(format: "%3d", percent))% \(message)\u{1B}[K")
        } else {
            write("\(percent)% \(message)\n")
        }
    }

    /// Ends the bar's line on a terminal.
    public func finish() {
        if isTerminal { write("\n") }
    }
}

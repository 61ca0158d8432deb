import Foundation
import Synchronization

/// Severity of a log line; lines below the process-wide level are dropped.
public enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case debug, info, warning, error

    public init?(name: String) {
        switch name.lowercased() {
        case "debug", "trace": self = .debug
        case "info": self = .info
        case "warning", "warn": self = .warning
        case "error": self = .error
        default: return nil
        }
    }

    public var name: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warning: "warning"
        case .error: "error"
        }
    }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One-line structured logging to standard error: `2026-11-22T10:00:00.123Z info zoo: message key=value`.
public struct Logger: Sendable {
    private static let threshold = Atomic<Int>(LogLevel.info.rawValue)
    private static let output = Mutex(())

    /// The process-wide minimum level.
    public static var level: LogLevel {
        get { LogLevel(rawValue: threshold.load(ordering: .relaxed)) ?? .info }
        set { threshold.store(newValue.rawValue, ordering: .relaxed) }
    }

    public let label: String

    public init(label: String) { self.label = label }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard level >= Logger.level else { return }
        let line = "\(Self.timestamp()) \(level.name) \(label): \(Self.sanitized(message()))\n"
        Logger.output.withLock { _ in
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    /// Longest message written, in UTF-8 bytes; the rest is cut and counted.
    public static let maxMessageBytes = 4096

    /// `message` as one line of printable text: messages quote what clients send (method names, search
    /// text, file contents), and a newline in them would forge a log line of its own, a NUL or an escape
    /// sequence would garble the file or the terminal showing it. Control characters become `\n`, `\r`,
    /// `\t` or `\u{…}`; a message longer than `maxMessageBytes` is cut there.
    public static func sanitized(_ message: String) -> String {
        let needsEscaping = message.utf8.contains { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 }
        guard needsEscaping || message.utf8.count > maxMessageBytes else { return message }
        var result = ""
        var bytes = 0, consumed = 0
        for scalar in message.unicodeScalars {
            let piece: String
            switch scalar {
            case "\n": piece = "\\n"
            case "\r": piece = "\\r"
            case "\t": piece = "\\t"
            case _ where scalar.properties.generalCategory == .control:
                piece = "\\u{\(String(scalar.value, radix: 16))}"
            default: piece = String(scalar)
            }
            bytes += piece.utf8.count
            if bytes > maxMessageBytes {
                result += "… (\(message.utf8.count - consumed) more bytes)"
                break
            }
            consumed += UTF8.width(scalar)
            result += piece
        }
        return result
    }

    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1,
            parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, now.tv_nsec / 1_000_000)
    }
}

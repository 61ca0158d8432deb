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

/// How log lines are written (a service's `--log-format`): for people, or for a log pipeline that should
/// not have to guess where a message ends.
public enum LogFormat: Int, Sendable, CaseIterable {
    /// `2026-11-22T10:00:00.123Z info zoo: message`
    case text
    /// `ts=2026-11-22T10:00:00.123Z level=info service=zoo msg="message"` (logfmt: `\` and `"` escaped in the quotes)
    case logfmt
    /// `{"ts":"2026-11-22T10:00:00.123Z","level":"info","service":"zoo","msg":"message"}` (JSON lines)
    case json

    public init?(name: String) {
        guard let format = Self.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = format
    }

    public var name: String {
        switch self {
        case .text: "text"
        case .logfmt: "logfmt"
        case .json: "json"
        }
    }
}

/// One-line logging to standard error, as text (`2026-11-22T10:00:00.123Z info zoo: message`), logfmt or
/// JSON lines (`Logger.format`). Whatever a message quotes, a line stays one line: control characters are
/// escaped in every format.
public struct Logger: Sendable {
    private static let threshold = Atomic<Int>(LogLevel.info.rawValue)
    private static let formatSetting = Atomic<Int>(LogFormat.text.rawValue)
    private static let output = Mutex(())

    /// The process-wide minimum level.
    public static var level: LogLevel {
        get { LogLevel(rawValue: threshold.load(ordering: .relaxed)) ?? .info }
        set { threshold.store(newValue.rawValue, ordering: .relaxed) }
    }

    /// The process-wide line format.
    public static var format: LogFormat {
        get { LogFormat(rawValue: formatSetting.load(ordering: .relaxed)) ?? .text }
        set { formatSetting.store(newValue.rawValue, ordering: .relaxed) }
    }

    public let label: String

    public init(label: String) { self.label = label }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard level >= Logger.level else { return }
        let line = Self.line(
            timestamp: Self.timestamp(), level: level, label: label, message: message(), format: Logger.format)
        Logger.output.withLock { _ in
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    /// One log line, newline included, in `format`.
    public static func line(timestamp: String, level: LogLevel, label: String, message: String, format: LogFormat)
        -> String
    {
        switch format {
        case .text:
            return "\(timestamp) \(level.name) \(sanitized(label)): \(sanitized(message))\n"
        case .logfmt:
            return
                "ts=\(timestamp) level=\(level.name) service=\"\(escaped(label, json: false))\" msg=\"\(escaped(message, json: false))\"\n"
        case .json:
            return
                "{\"ts\":\"\(timestamp)\",\"level\":\"\(level.name)\",\"service\":\"\(escaped(label, json: true))\",\"msg\":\"\(escaped(message, json: true))\"}\n"
        }
    }

    /// `value` for the inside of a quoted logfmt value or a JSON string, cut at `maxMessageBytes` like
    /// `sanitized`: `\` and `"` escaped, control characters as `\n`, `\r`, `\t` or (JSON) `\u00XX`,
    /// (logfmt) `\u{…}`.
    static func escaped(_ value: String, json: Bool) -> String {
        var result = ""
        var bytes = 0, consumed = 0
        for scalar in value.unicodeScalars {
            let piece: String
            switch scalar {
            case "\\": piece = "\\\\"
            case "\"": piece = "\\\""
            case "\n": piece = "\\n"
            case "\r": piece = "\\r"
            case "\t": piece = "\\t"
            case _ where scalar.properties.generalCategory == .control || scalar == "\u{2028}" || scalar == "\u{2029}":
                let hex = String(scalar.value, radix: 16)
                piece = json ? "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex : "\\u{\(hex)}"
            default: piece = String(scalar)
            }
            bytes += piece.utf8.count
            if bytes > maxMessageBytes {
                result += "… (\(value.utf8.count - consumed) more bytes)"
                break
            }
            consumed += UTF8.width(scalar)
            result += piece
        }
        return result
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

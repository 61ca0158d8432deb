/// Duration in the units the runtime hands to other code: figures in seconds, the wire's
/// microseconds (`timeout_micros`, latency histograms) and libuv's milliseconds. One place, so that
/// rounding is decided once: down for what is reported, up for timers (which must never fire early).
extension Duration {
    /// The duration in seconds, as a floating-point number (reports, uptime).
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Whole microseconds, rounded down; 0 for a negative duration.
    public var wholeMicroseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000 + UInt64(attoseconds / 1_000_000_000_000)
    }

    /// Whole nanoseconds, rounded toward zero, clamped to `Int64` (about 292 years).
    public var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components  // read once: each reading divides 128-bit attoseconds
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, carry) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflow || carry ? (seconds < 0 ? .min : .max) : sum
    }

    /// Whole milliseconds, rounded up so a timer never fires early; 0 for a negative duration.
    public var millisecondsRoundedUp: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        return UInt64(seconds) * 1000 + UInt64((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }
}

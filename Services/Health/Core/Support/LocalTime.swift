import Foundation

/// A wall-clock time in a zone, made an instant as java.time's `ZonedDateTime.of` does: a time the clocks skip
/// (in a spring-forward gap) is moved later by the gap's length, and a time they show twice (in a fall-back
/// overlap) takes the earlier offset, the first time it happens. Either way the resolution says how, so a
/// caller can warn: a time stored silently as another one is a wrong result.
public enum LocalTime {
    public struct Resolution: Sendable, Hashable {
        public var instant: EpochMilliseconds
        /// Nil for a time that exists once; otherwise what was done with it, in a sentence.
        public var note: String?
    }

    /// `wall`: the local date and time as milliseconds since 1970-01-01T00:00 of that wall clock.
    public static func resolve(wall: Int64, in zone: TimeZone) -> Resolution {
        func offset(at instant: Int64) -> Int64 {
            Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(instant) / 1000))) * 1000
        }
        // The offsets in force a day either side bound every offset the wall time can have (no zone changes
        // twice in a day); an offset fits when the instant it gives has that offset.
        let day: Int64 = 86_400_000
        let before = offset(at: wall - day), after = offset(at: wall + day)
        let fitting = Set([before, after, offset(at: wall - before), offset(at: wall - after)]).filter {
            offset(at: wall - $0) == $0
        }
        let text = Timestamps.format(wall).dropLast()  // the wall time without the "Z"
        if fitting.count > 1 {
            let earlier = fitting.max()!, later = fitting.min()!
            return Resolution(
                instant: wall - earlier,
                note: "\(text) happens twice in \(zone.identifier) (the clocks go back); taken as the first, "
                    + "\(Timestamps.format(wall - earlier, offset: Int(earlier / 1000))), not \(Timestamps.format(wall - later, offset: Int(later / 1000))) (give the offset to choose)"
            )
        }
        if let only = fitting.first { return Resolution(instant: wall - only, note: nil) }
        // In a gap: the offset before it, which is the wall time moved later by the gap's length.
        let instant = wall - before
        let shifted = Timestamps.format(instant, offset: Int(offset(at: instant) / 1000))
        return Resolution(
            instant: instant,
            note:
                "\(text) does not exist in \(zone.identifier) (the clocks skip it); taken as \(shifted), later by the gap's \((after - before) / 60_000) minutes (give the offset to choose)"
        )
    }
}

import Foundation

@testable import HealthCore

/// Shorthand for tests: instants from ISO strings, and samples with sensible defaults.
enum T {
    static func ms(_ text: String) -> EpochMilliseconds {
        guard let (instant, _) = Timestamps.parse(text) else { fatalError("bad test timestamp \(text)") }
        return instant
    }

    static func sample(
        _ type: HealthType = .stepCount, _ value: Double, _ start: String, _ end: String? = nil,
        source: String = "iPhone", uuid: UUID = UUID(), zone: String? = nil
    ) -> HealthSample {
        HealthSample(
            uuid: uuid, type: type, value: value, start: ms(start), end: ms(end ?? start), source: source,
            timeZone: zone)
    }

    static let prague = TimeZone(identifier: "Europe/Prague")!
    static let utc = TimeZone(identifier: "UTC")!
}

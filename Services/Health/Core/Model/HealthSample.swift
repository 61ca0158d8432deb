import Foundation

/// An instant as milliseconds since 1970-01-01T00:00:00Z: what the database stores and the wire carries.
public typealias EpochMilliseconds = Int64

/// One key/value pair of a sample's metadata (`HKMetadataKeyWasUserEntered` → `1`). Kept in order, as given.
public struct MetadataEntry: Sendable, Hashable {
    public var key: String
    public var value: String

    public init(_ key: String, _ value: String) {
        self.key = key
        self.value = value
    }
}

/// One health sample, immutable once stored (as in HealthKit): its UUID names exactly this content.
///
/// `value` is in the type's canonical unit (for `sleepAnalysis`, the `SleepValue` raw value).
public struct HealthSample: Sendable, Hashable {
    public var uuid: UUID
    public var type: HealthType
    public var value: Double
    public var start: EpochMilliseconds
    public var end: EpochMilliseconds
    /// The device or app that recorded it ("Apple Watch", "MyWaterApp").
    public var source: String
    /// The zone the sample was recorded in: an IANA name or a fixed offset such as `-0700`; nil when unknown.
    public var timeZone: String?
    public var metadata: [MetadataEntry]

    /// A sample whose `value` is already in the type's canonical unit.
    public init(
        uuid: UUID = UUID(), type: HealthType, value: Double, start: EpochMilliseconds, end: EpochMilliseconds,
        source: String, timeZone: String? = nil, metadata: [MetadataEntry] = []
    ) {
        self.uuid = uuid
        self.type = type
        self.value = value
        self.start = start
        self.end = end
        self.source = source
        self.timeZone = timeZone
        self.metadata = metadata
    }

    /// A sample whose `value` is in `unit`, converted to the canonical unit; INVALID_ARGUMENT for a unit of
    /// another dimension.
    public init(
        uuid: UUID = UUID(), type: HealthType, value: Double, unit: HealthUnit, start: EpochMilliseconds,
        end: EpochMilliseconds, source: String, timeZone: String? = nil, metadata: [MetadataEntry] = []
    ) throws(HealthError) {
        let canonical: Double
        if type.kind == .category {
            guard unit == .count else { throw .invalid("\(type.rawValue) takes a category value, not \(unit.symbol)") }
            canonical = value
        } else {
            canonical = try unit.convert(value, to: type.canonicalUnit)
        }
        self.init(
            uuid: uuid, type: type, value: canonical, start: start, end: end, source: source, timeZone: timeZone,
            metadata: metadata)
    }

    /// The value in `unit`; INVALID_ARGUMENT for a unit of another dimension.
    public func value(in unit: HealthUnit) throws(HealthError) -> Double {
        try type.canonicalUnit.convert(value, to: unit)
    }

    /// The sleep stage of a `sleepAnalysis` sample.
    public var sleepValue: SleepValue? { type == .sleepAnalysis ? SleepValue(rawValue: Int(value)) : nil }

    /// Duration in milliseconds.
    public var duration: Int64 { end - start }
}

extension HealthSample {
    /// Same UUID, same content: a re-sent sample. Same UUID, different content: a conflict.
    /// Values compare after the canonical conversion, so 1 L and 1000 mL are the same content.
    public func hasSameContent(as other: HealthSample) -> Bool {
        uuid == other.uuid && type == other.type && value == other.value && start == other.start
            && end == other.end && source == other.source && timeZone == other.timeZone && metadata == other.metadata
    }
}

import Foundation
import Synchronization

/// Limits on what one sample and one batch may carry, so garbage fails with a clear status.
public struct SampleLimits: Sendable {
    public var maxSourceBytes = 256
    public var maxMetadataEntries = 64
    public var maxMetadataKeyBytes = 256
    public var maxMetadataValueBytes = 4096
    /// A batch larger than this is RESOURCE_EXHAUSTED: the client splits, the server does not buffer.
    public var maxBatchSamples = 10_000
    /// Samples before this are refused (1900-01-01) as are those after 2200: a seconds/milliseconds mix-up.
    public var earliest: EpochMilliseconds = -2_208_988_800_000
    public var latest: EpochMilliseconds = 7_258_118_400_000
    /// How far past the validating clock a sample may end: a day. A sample records what happened, so one dated in
    /// 2199 is as wrong as a negative step count; a day leaves room for a device clock running ahead and for a
    /// local time read in the wrong zone.
    public var maxFutureMilliseconds: EpochMilliseconds = 86_400_000

    public init() {}
    public static let standard = SampleLimits()
}

extension HealthSample {
    /// Throws INVALID_ARGUMENT naming the first thing wrong with this sample.
    public func validate(_ limits: SampleLimits = .standard) throws(HealthError) {
        // Computed when an error needs it: a million valid imported samples need no UUID strings.
        var name: String { "sample \(uuid.uuidString.lowercased())" }
        guard start <= end else {
            throw .invalid("\(name): end \(Timestamps.format(end)) is before start \(Timestamps.format(start))")
        }
        guard start >= limits.earliest, end <= limits.latest else {
            throw .invalid("\(name): time \(start)…\(end) ms is outside 1900–2200 (seconds sent as milliseconds?)")
        }
        let now = EpochMilliseconds((Date().timeIntervalSince1970 * 1000).rounded())
        guard end <= now + limits.maxFutureMilliseconds else {
            throw .invalid(
                "\(name): ends \(Timestamps.format(end)), in the future (at most a day ahead of \(Timestamps.format(now)) is accepted)"
            )
        }
        guard value.isFinite else { throw .invalid("\(name): value \(value) is not a finite number") }
        let range = type.plausibleRange
        guard range.contains(value) else {
            throw .invalid(
                "\(name): \(type.rawValue) value \(value) \(type.canonicalUnit.symbol) is outside \(range.lowerBound)…\(range.upperBound)"
            )
        }
        if type.kind == .category, value.rounded() != value || SleepValue(rawValue: Int(value)) == nil {
            throw .invalid("\(name): \(value) is not a known \(type.rawValue) category value")
        }
        guard !source.isEmpty else { throw .invalid("\(name): source is empty") }
        guard source.utf8.count <= limits.maxSourceBytes else {
            throw .invalid("\(name): source is longer than \(limits.maxSourceBytes) bytes")
        }
        if let zone = timeZone, !TimeZoneName.isValid(zone) {
            throw .invalid("\(name): unknown time zone \"\(zone)\"")
        }
        guard metadata.count <= limits.maxMetadataEntries else {
            throw .invalid("\(name): \(metadata.count) metadata entries, at most \(limits.maxMetadataEntries)")
        }
        for entry in metadata {
            guard !entry.key.isEmpty, entry.key.utf8.count <= limits.maxMetadataKeyBytes else {
                throw .invalid("\(name): metadata key empty or longer than \(limits.maxMetadataKeyBytes) bytes")
            }
            guard entry.value.utf8.count <= limits.maxMetadataValueBytes else {
                throw .invalid(
                    "\(name): metadata value of \(entry.key) is \(entry.value.utf8.count) bytes, at most \(limits.maxMetadataValueBytes)"
                )
            }
        }
    }

    /// Validates a whole batch: too many samples is RESOURCE_EXHAUSTED; one bad sample rejects the batch,
    /// and the error names it (by UUID and position) and the reason.
    public static func validate(batch: [HealthSample], _ limits: SampleLimits = .standard) throws(HealthError) {
        guard batch.count <= limits.maxBatchSamples else {
            throw HealthError(
                .resourceExhausted,
                "a batch of \(batch.count) samples is over the limit of \(limits.maxBatchSamples); split it")
        }
        for (index, sample) in batch.enumerated() {
            do {
                try sample.validate(limits)
            } catch {
                throw .invalid("batch rejected, #\(index) \(error.message)")
            }
        }
    }
}

/// Time zone names a sample may carry: IANA names Foundation knows, or fixed offsets `±hhmm` as exports write.
public enum TimeZoneName {
    /// Names already checked: an import asks about the same few zones a million times.
    private static let known = Mutex<[String: Bool]>([:])

    public static func isValid(_ name: String) -> Bool {
        if let answer = known.withLock({ $0[name] }) { return answer }
        let answer = timeZone(name) != nil
        known.withLock { cache in
            if cache.count > 1000 { cache.removeAll() }
            cache[name] = answer
        }
        return answer
    }

    /// The zone `name` denotes, nil when unknown.
    public static func timeZone(_ name: String) -> TimeZone? {
        if let offset = fixedOffsetSeconds(name) { return TimeZone(secondsFromGMT: offset) }
        return TimeZone(identifier: name)
    }

    /// `+0100` / `-0700` as seconds east of UTC.
    static func fixedOffsetSeconds(_ name: String) -> Int? {
        let bytes = Array(name.utf8)
        guard bytes.count == 5, bytes[0] == UInt8(ascii: "+") || bytes[0] == UInt8(ascii: "-") else { return nil }
        var digits = 0
        for byte in bytes[1...] {
            guard byte >= 48, byte <= 57 else { return nil }
            digits = digits * 10 + Int(byte - 48)
        }
        let hours = digits / 100, minutes = digits % 100
        guard hours <= 14, minutes < 60 else { return nil }
        let seconds = hours * 3600 + minutes * 60
        return bytes[0] == UInt8(ascii: "-") ? -seconds : seconds
    }
}

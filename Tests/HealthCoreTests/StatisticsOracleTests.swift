import Foundation
import StorageTestSupport
import Testing

@testable import HealthCore

/// Statistics over partial ranges against a brute-force oracle that knows nothing of the store, its cells or
/// Foundation's calendar: bucket edges from Prague's 2026 offsets by arithmetic, sums from every sample's
/// overlap with each bucket in proportion to its time, discrete figures from the samples starting in it.
@Suite struct StatisticsOracleTests {
    let store: HealthStore
    let user: Int64
    let samples: [HealthSample]

    /// Minute samples (inside one rollup cell), samples of up to three hours off the grid (spanning cells and
    /// buckets), instants, and heart rates, around both of 2026's DST changes in Prague.
    init() throws {
        store = try HealthStore.inMemory(using: .testBackend)
        user = try store.createUser(name: "alice").user.id
        var random = Generator(seed: 39)
        var made: [HealthSample] = []
        for (from, to) in [
            ("2026-03-25T00:00:00Z", "2026-04-03T00:00:00Z"), ("2026-10-22T00:00:00Z", "2026-11-04T00:00:00Z"),
        ] {
            let start = T.ms(from), span = T.ms(to) - start
            for index in 0..<1500 {
                let begin: Int64, length: Int64
                switch index % 3 {
                case 0:
                    begin = start + random.below(span / 60_000) * 60_000
                    length = 60_000
                case 1:
                    begin = start + random.below(span)
                    length = 1 + random.below(3 * 3_600_000)
                default:
                    begin = start + random.below(span)
                    length = 0
                }
                made.append(
                    HealthSample(
                        type: .stepCount, value: Double(1 + random.below(200)), start: begin, end: begin + length,
                        source: "iPhone"))
            }
            for _ in 0..<500 {
                let begin = start + random.below(span)
                made.append(
                    HealthSample(
                        type: .heartRate, value: Double(40 + random.below(140)), start: begin, end: begin,
                        source: "Watch"))
            }
        }
        samples = made
        _ = try store.add(made, user: user)
    }

    static let ranges: [(String, String)] = [
        ("2026-03-28T12:00:00+01:00", "2026-03-28T18:00:00+01:00"),  // the issue's
        ("2026-03-28T12:30:17.250+01:00", "2026-03-30T14:07:00+02:00"),
        ("2026-03-29T01:30:00+01:00", "2026-03-29T03:45:00+02:00"),  // across the skipped hour
        ("2026-03-26T08:10:00+01:00", "2026-04-01T20:20:00+02:00"),  // a Monday and a first of the month inside
        ("2026-10-25T01:30:00+02:00", "2026-10-25T02:30:00+01:00"),  // across the repeated hour
        ("2026-10-24T12:30:00+02:00", "2026-11-02T03:15:00+01:00"),
        ("2026-10-26T00:00:00+01:00", "2026-10-27T00:00:00+01:00"),  // exactly one day
    ]

    @Test(arguments: [StatisticsInterval?.none, .hour, .day, .week, .month])
    func partialRangesMatchTheOracle(_ interval: StatisticsInterval?) throws {
        for (from, to) in Self.ranges {
            let edges = Self.edges(from: T.ms(from), to: T.ms(to), interval)
            for type in [HealthType.stepCount, .heartRate] {
                let result = try store.statistics(
                    StatisticsRequest(
                        type: type, from: T.ms(from), to: T.ms(to), interval: interval, timeZone: T.prague), user: user)
                let label = "\(type.rawValue) \(from)–\(to) by \(interval?.rawValue ?? "range")"
                #expect(result.buckets.map(\.start) == Array(edges.dropLast()), "\(label)")
                #expect(result.buckets.map(\.end) == Array(edges.dropFirst()), "\(label)")
                guard result.buckets.count == edges.count - 1 else { continue }
                for (index, bucket) in result.buckets.enumerated() {
                    let expected = oracle(type, edges[index], edges[index + 1])
                    #expect(bucket.count == expected.count, "\(label) bucket \(index)")
                    if type == .stepCount {
                        #expect(
                            abs((bucket.sum ?? -1) - expected.sum) < 1e-6,
                            "\(label) bucket \(index): \(bucket.sum ?? -1) vs \(expected.sum)")
                    } else {
                        #expect(
                            bucket.minimum == expected.minimum && bucket.maximum == expected.maximum,
                            "\(label) bucket \(index)")
                        #expect(
                            abs((bucket.average ?? -1) - (expected.average ?? -1)) < 1e-9, "\(label) bucket \(index)")
                    }
                }
            }
        }
    }

    /// What lies in `start..<end`: a cumulative sample's share by overlap (an instant where it falls), and
    /// the discrete samples starting there.
    func oracle(_ type: HealthType, _ start: Int64, _ end: Int64)
        -> (sum: Double, count: Int, average: Double?, minimum: Double?, maximum: Double?)
    {
        var sum = 0.0, values: [Double] = []
        for sample in samples where sample.type == type {
            if type == .stepCount, sample.end > sample.start {
                let overlap = min(sample.end, end) - max(sample.start, start)
                guard overlap > 0 else { continue }
                sum += sample.value * Double(overlap) / Double(sample.end - sample.start)
                values.append(sample.value)
            } else if sample.start >= start, sample.start < end {
                sum += sample.value
                values.append(sample.value)
            }
        }
        return (
            sum, values.count, values.isEmpty ? nil : values.reduce(0, +) / Double(values.count), values.min(),
            values.max()
        )
    }

    /// Prague's offset in 2026 at a UTC instant: CET, CEST from 29 March 01:00 UTC, CET from 25 October 01:00 UTC.
    static func pragueOffset(_ utc: Int64) -> Int64 {
        utc >= T.ms("2026-03-29T01:00:00Z") && utc < T.ms("2026-10-25T01:00:00Z") ? 7_200_000 : 3_600_000
    }

    /// The UTC instant of a Prague local midnight (never in a gap or overlap: they are at 02:00–03:00).
    static func utc(localMidnight local: Int64) -> Int64 {
        [7_200_000, 3_600_000].map { local - $0 }.first { pragueOffset($0) == local - $0 }!
    }

    /// `from`, the unit starts strictly inside the range, `to`. Prague's offsets are whole hours, so its hours
    /// start on UTC hours.
    static func edges(from: Int64, to: Int64, _ interval: StatisticsInterval?) -> [Int64] {
        var starts: [Int64] = []
        let day: Int64 = 86_400_000
        switch interval {
        case nil: break
        case .hour: starts = stride(from: (from / 3_600_000 + 1) * 3_600_000, to: to, by: 3_600_000).map { $0 }
        case .day?, .week?, .month?:
            for number in (from / day - 1)...(to / day + 1) {
                let date = Timestamps.civil(days: Int(number))
                let monday = (number + 3) % 7 == 0  // 1970-01-01 was a Thursday
                guard interval == .day || (interval == .week && monday) || (interval == .month && date.day == 1) else {
                    continue
                }
                let instant = utc(localMidnight: number * day)
                if instant > from, instant < to { starts.append(instant) }
            }
        }
        return [from] + starts + [to]
    }
}

/// A small deterministic generator (SplitMix64), so a failure can be reproduced.
struct Generator {
    var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func below(_ bound: Int64) -> Int64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Int64(z % UInt64(bound))
    }
}

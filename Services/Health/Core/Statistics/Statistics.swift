import Foundation
import Storage

/// The length of statistics buckets, in the calendar of the request's time zone.
public enum StatisticsInterval: String, Sendable, Hashable, CaseIterable {
    case hour, day, week, month

    var component: Calendar.Component {
        switch self {
        case .hour: .hour
        case .day: .day
        case .week: .weekOfYear
        case .month: .month
        }
    }
}

/// Ranges people ask for, in the request's time zone.
public enum StatisticsPreset: String, Sendable, Hashable, CaseIterable {
    case today, last7Days, last30Days, thisMonth

    /// The range at `now` in `timeZone`: whole local days, today included ("last 7 days" is today and the 6 before).
    public func range(now: EpochMilliseconds, timeZone: TimeZone) -> (from: EpochMilliseconds, to: EpochMilliseconds) {
        let calendar = HealthCalendar.calendar(timeZone)
        let date = HealthCalendar.date(now)
        let today = calendar.startOfDay(for: date)
        let tomorrow = calendar.date(byAdding: .day, value: 1, to: today)!
        switch self {
        case .today:
            return (HealthCalendar.ms(today), HealthCalendar.ms(tomorrow))
        case .last7Days, .last30Days:
            let first = calendar.date(byAdding: .day, value: self == .last7Days ? -6 : -29, to: today)!
            return (HealthCalendar.ms(first), HealthCalendar.ms(tomorrow))
        case .thisMonth:
            let month = calendar.dateInterval(of: .month, for: date)!
            return (HealthCalendar.ms(month.start), HealthCalendar.ms(month.end))
        }
    }
}

enum HealthCalendar {
    /// Gregorian, weeks starting on Monday (ISO 8601), in `timeZone`.
    static func calendar(_ timeZone: TimeZone) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        calendar.firstWeekday = 2
        calendar.minimumDaysInFirstWeek = 4
        return calendar
    }

    static func date(_ ms: EpochMilliseconds) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }
    static func ms(_ date: Date) -> EpochMilliseconds {
        EpochMilliseconds((date.timeIntervalSince1970 * 1000).rounded())
    }
}

/// A statistics query: HealthKit's `HKStatisticsQuery` (no interval) or `HKStatisticsCollectionQuery`.
public struct StatisticsRequest: Sendable, Hashable {
    public var type: HealthType
    public var from: EpochMilliseconds
    public var to: EpochMilliseconds
    /// Nil: one figure over `from..<to`. Otherwise buckets of calendar units in `timeZone`, the first and last
    /// cut to the range: the first runs from `from` to the end of its unit, the last from its unit's start to `to`.
    public var interval: StatisticsInterval?
    public var timeZone: TimeZone
    /// The unit of the answer; nil for the type's (minutes for sleep).
    public var unit: HealthUnit?
    /// De-duplicates overlapping samples of a cumulative type: where samples of several sources overlap, the
    /// source earliest in this list counts and the others' overlapping time is dropped (sources not listed rank
    /// after the listed ones, by name). Nil: every sample counts.
    public var sourcePriority: [String]?
    /// For sleep: which stages count (default: asleep in any stage). Their intervals are merged, not added.
    public var sleepValues: Set<SleepValue>?

    public init(
        type: HealthType, from: EpochMilliseconds, to: EpochMilliseconds, interval: StatisticsInterval? = nil,
        timeZone: TimeZone = TimeZone(identifier: "UTC")!, unit: HealthUnit? = nil, sourcePriority: [String]? = nil,
        sleepValues: Set<SleepValue>? = nil
    ) {
        self.type = type
        self.from = from
        self.to = to
        self.interval = interval
        self.timeZone = timeZone
        self.unit = unit
        self.sourcePriority = sourcePriority
        self.sleepValues = sleepValues
    }
}

/// One bucket's figures, in the result's unit. Cumulative types and sleep fill `sum`; discrete ones
/// `average`, `minimum` and `maximum`. `count` is the number of samples that contributed (for cumulative
/// types, a sample split between buckets counts in each).
public struct StatisticsBucket: Sendable, Hashable {
    public var start: EpochMilliseconds
    public var end: EpochMilliseconds
    public var sum: Double?
    public var average: Double?
    public var minimum: Double?
    public var maximum: Double?
    public var count: Int

    /// The bucket's main figure: the sum, or for discrete types the average.
    public var value: Double? { sum ?? average }
}

public struct StatisticsResult: Sendable, Hashable {
    public var type: HealthType
    public var unit: HealthUnit
    public var buckets: [StatisticsBucket]
}

extension HealthStore {
    /// Statistics for one user. Reads the 15-minute rollup cells for everything that fits in one, and only the
    /// samples that span a cell boundary one by one: a year of daily steps reads ~35k cells, not ~525k samples.
    public func statistics(_ request: StatisticsRequest, user: Int64) throws -> StatisticsResult {
        guard request.from <= request.to else {
            throw HealthError.invalid(
                "statistics range ends (\(Timestamps.format(request.to))) before it starts (\(Timestamps.format(request.from)))"
            )
        }
        let unit = request.unit ?? request.type.statisticsUnit
        guard unit.dimension == request.type.statisticsUnit.dimension else {
            throw HealthError.invalid(
                "cannot report \(request.type.rawValue) in \(unit.symbol); it is measured in \(request.type.statisticsUnit.symbol)"
            )
        }
        let boundaries = try Self.boundaries(request)
        var accumulator = BucketAccumulator(boundaries: boundaries)
        try database.read { db in
            switch request.type.kind {
            case .category:
                try sleep(request, user: user, into: &accumulator, db)
            case .cumulative where request.sourcePriority != nil:
                try deduplicated(request, user: user, into: &accumulator, db)
            case .cumulative, .discrete:
                try rolledUp(request.type, user: user, into: &accumulator, db)
            }
        }
        let buckets = try accumulator.buckets(kind: request.type.kind).map { bucket throws(HealthError) in
            var converted = bucket
            let from = request.type.statisticsUnit
            converted.sum = try bucket.sum.map { value throws(HealthError) in try from.convert(value, to: unit) }
            converted.average = try bucket.average.map { value throws(HealthError) in try from.convert(value, to: unit)
            }
            converted.minimum = try bucket.minimum.map { value throws(HealthError) in try from.convert(value, to: unit)
            }
            converted.maximum = try bucket.maximum.map { value throws(HealthError) in try from.convert(value, to: unit)
            }
            return converted
        }
        return StatisticsResult(type: request.type, unit: unit, buckets: buckets)
    }

    /// Bucket edges in UTC milliseconds: `[from, to]` without an interval, else the calendar units' edges inside
    /// it, with `from` and `to` at the ends: the first and last buckets are cut to the range, as HealthKit's
    /// collection counts only what its predicate's range holds (12:00–18:00 by day is 12:00–18:00, not the day).
    static func boundaries(_ request: StatisticsRequest) throws -> [EpochMilliseconds] {
        var edges = try unitEdges(request)
        edges[0] = request.from
        edges[edges.count - 1] = request.to
        return edges
    }

    /// The edges of the whole calendar units covering the request's range.
    private static func unitEdges(_ request: StatisticsRequest) throws -> [EpochMilliseconds] {
        guard let interval = request.interval else { return [request.from, request.to] }
        let calendar = HealthCalendar.calendar(request.timeZone)
        guard var current = calendar.dateInterval(of: interval.component, for: HealthCalendar.date(request.from))
        else { throw HealthError.invalid("no \(interval.rawValue) contains \(request.from)") }
        var edges = [HealthCalendar.ms(current.start)]
        let limit = interval == .hour ? 24 * 366 * 2 : 5000
        while true {
            let end = HealthCalendar.ms(current.end)
            edges.append(end)
            if end >= request.to || request.from == request.to { break }
            guard edges.count <= limit else {
                throw HealthError(
                    .resourceExhausted, "more than \(limit) \(interval.rawValue) buckets; narrow the range")
            }
            guard let next = calendar.dateInterval(of: interval.component, for: current.end) else { break }
            current = next
        }
        return edges
    }

    private func rolledUp(_ type: HealthType, user: Int64, into accumulator: inout BucketAccumulator, _ db: Connection)
        throws
    {
        let size = HealthSchema.cellMilliseconds
        let from = accumulator.start, to = accumulator.end
        let firstCell = Timestamps.floorDivide(from, size).0
        let lastCell = Timestamps.floorDivide(to - 1, size).0
        let rows = try db.prepare(
            "SELECT cell, total, count, minimum, maximum FROM cells WHERE user_id = ? AND type = ? AND cell BETWEEN ? AND ? ORDER BY cell"
        ).query([user, type.code, firstCell, lastCell])
        var ragged: [Int64] = []
        for row in rows {
            guard let cell = row.int64(0), let total = row.double(1), let count = row.int(2),
                let minimum = row.double(3),
                let maximum = row.double(4)
            else { continue }
            if !accumulator.addCell(
                start: cell * size, end: (cell + 1) * size, total: total, count: count, minimum: minimum,
                maximum: maximum)
            {
                ragged.append(cell)
            }
        }
        // Cells cut by a bucket edge or the range (an edge off the 15-minute grid): their samples one by one.
        let cellSamples = try db.prepare(
            "SELECT start_ms, end_ms, value FROM samples WHERE user_id = ? AND type = ? AND start_ms >= ? AND start_ms < ? AND cell = ?"
        )
        for cell in ragged {
            for row in try cellSamples.query([user, type.code, cell * size, (cell + 1) * size, cell]) {
                accumulator.add(start: row.int64(0)!, end: row.int64(1)!, value: row.double(2)!, kind: type.kind)
            }
        }
        guard type.kind == .cumulative else { return }
        let longest =
            try db.queryOne("SELECT longest_ms FROM type_spans WHERE user_id = ? AND type = ?", [user, type.code])?
            .int64(0) ?? 0
        let spanning = try db.prepare(
            """
            SELECT start_ms, end_ms, value FROM samples
            WHERE user_id = ? AND type = ? AND cell IS NULL AND start_ms >= ? AND start_ms < ? AND end_ms > ?
            """
        ).query([user, type.code, from - longest, to, from])
        for row in spanning {
            accumulator.add(start: row.int64(0)!, end: row.int64(1)!, value: row.double(2)!, kind: .cumulative)
        }
    }

    /// Samples overlapping the accumulator's range, one by one.
    private func overlapping(_ type: HealthType, user: Int64, _ accumulator: BucketAccumulator, _ db: Connection) throws
        -> [HealthSample]
    {
        try Self.samples(SampleQuery(types: [type], from: accumulator.start, to: accumulator.end), user: user, db)
            .map(Self.decodeSample)
    }

    private func deduplicated(
        _ request: StatisticsRequest, user: Int64, into accumulator: inout BucketAccumulator, _ db: Connection
    ) throws {
        let samples = try overlapping(request.type, user: user, accumulator, db)
        let priority = request.sourcePriority ?? []
        let rank = Dictionary(priority.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        let ordered = samples.sorted {
            let left = rank[$0.source] ?? Int.max, right = rank[$1.source] ?? Int.max
            if left != right { return left < right }
            if $0.source != $1.source { return $0.source < $1.source }
            return ($0.start, $0.end, $0.uuid.uuidString) < ($1.start, $1.end, $1.uuid.uuidString)
        }
        var covered = IntervalSet()
        for sample in ordered {
            if sample.duration == 0 {
                if !covered.contains(sample.start) {
                    accumulator.add(start: sample.start, end: sample.end, value: sample.value, kind: .cumulative)
                }
                continue
            }
            for piece in covered.uncovered(sample.start, sample.end) {
                let share = sample.value * Double(piece.1 - piece.0) / Double(sample.duration)
                accumulator.add(start: piece.0, end: piece.1, value: share, kind: .cumulative)
            }
            covered.insert(sample.start, sample.end)
        }
    }

    private func sleep(
        _ request: StatisticsRequest, user: Int64, into accumulator: inout BucketAccumulator, _ db: Connection
    )
        throws
    {
        let stages = request.sleepValues ?? Set(SleepValue.allCases.filter(\.isAsleep))
        var merged = IntervalSet()
        for sample in try overlapping(request.type, user: user, accumulator, db) {
            guard let stage = sample.sleepValue, stages.contains(stage), sample.duration > 0 else { continue }
            merged.insert(sample.start, sample.end)
        }
        // Each merged interval counts once: a night recorded by the phone and the watch, or the same record
        // exported twice, is one night. Minutes, split over the buckets it spans.
        for (start, end) in merged.intervals {
            accumulator.add(start: start, end: end, value: Double(end - start) / 60_000, kind: .cumulative)
        }
    }
}

/// Disjoint, sorted half-open intervals.
struct IntervalSet {
    private(set) var intervals: [(Int64, Int64)] = []

    /// Index of the first interval ending after `point`.
    private func firstEnding(after point: Int64) -> Int {
        var low = 0, high = intervals.count
        while low < high {
            let middle = (low + high) / 2
            if intervals[middle].1 <= point { low = middle + 1 } else { high = middle }
        }
        return low
    }

    func contains(_ point: Int64) -> Bool {
        let index = firstEnding(after: point)
        return index < intervals.count && intervals[index].0 <= point
    }

    /// The parts of `start..<end` no interval covers.
    func uncovered(_ start: Int64, _ end: Int64) -> [(Int64, Int64)] {
        var pieces: [(Int64, Int64)] = []
        var cursor = start
        var index = firstEnding(after: start)
        while cursor < end {
            guard index < intervals.count, intervals[index].0 < end else {
                pieces.append((cursor, end))
                break
            }
            if intervals[index].0 > cursor { pieces.append((cursor, intervals[index].0)) }
            cursor = max(cursor, intervals[index].1)
            index += 1
        }
        return pieces
    }

    mutating func insert(_ start: Int64, _ end: Int64) {
        var low = firstEnding(after: start - 1)  // first interval that touches or follows `start`
        if low > 0, intervals[low - 1].1 >= start { low -= 1 }
        var high = low
        var newStart = start, newEnd = end
        while high < intervals.count, intervals[high].0 <= end {
            newStart = min(newStart, intervals[high].0)
            newEnd = max(newEnd, intervals[high].1)
            high += 1
        }
        intervals.replaceSubrange(low..<high, with: [(newStart, newEnd)])
    }
}

/// Adds values into buckets given by sorted edges; cumulative values are split in proportion to time.
struct BucketAccumulator {
    let edges: [EpochMilliseconds]
    private var totals: [Double]
    private var counts: [Int]
    private var minimums: [Double]
    private var maximums: [Double]

    init(boundaries: [EpochMilliseconds]) {
        edges = boundaries
        let count = max(boundaries.count - 1, 0)
        totals = Array(repeating: 0, count: count)
        counts = Array(repeating: 0, count: count)
        minimums = Array(repeating: .infinity, count: count)
        maximums = Array(repeating: -.infinity, count: count)
    }

    var start: EpochMilliseconds { edges.first ?? 0 }
    var end: EpochMilliseconds { edges.last ?? 0 }

    /// The bucket containing `instant`, nil outside the range.
    func bucket(of instant: EpochMilliseconds) -> Int? {
        guard instant >= start, instant < end else { return nil }
        var low = 0, high = edges.count - 1
        while high - low > 1 {
            let middle = (low + high) / 2
            if edges[middle] <= instant { low = middle } else { high = middle }
        }
        return low
    }

    /// Adds a whole cell when it lies inside one bucket; false when an edge cuts it (add its samples instead).
    mutating func addCell(start: Int64, end: Int64, total: Double, count: Int, minimum: Double, maximum: Double) -> Bool
    {
        guard let index = bucket(of: start) else { return end <= self.start || start >= self.end }
        guard end <= edges[index + 1] else { return false }
        totals[index] += total
        counts[index] += count
        minimums[index] = min(minimums[index], minimum)
        maximums[index] = max(maximums[index], maximum)
        return true
    }

    /// One sample: discrete ones go to the bucket of their start; cumulative ones are split in proportion to
    /// their time in each bucket (the part outside the range is dropped).
    mutating func add(start: Int64, end: Int64, value: Double, kind: HealthType.Kind) {
        if kind != .cumulative || end == start {
            guard let index = bucket(of: start) else { return }
            record(index, value, kind == .cumulative ? value : value)
            return
        }
        let duration = Double(end - start)
        var index = bucket(of: max(start, self.start)) ?? (start < self.start ? 0 : edges.count)
        while index < edges.count - 1, edges[index] < end {
            let overlap = min(end, edges[index + 1]) - max(start, edges[index])
            if overlap > 0 { record(index, value * Double(overlap) / duration, value) }
            index += 1
        }
    }

    private mutating func record(_ index: Int, _ share: Double, _ whole: Double) {
        totals[index] += share
        counts[index] += 1
        minimums[index] = min(minimums[index], whole)
        maximums[index] = max(maximums[index], whole)
    }

    func buckets(kind: HealthType.Kind) -> [StatisticsBucket] {
        totals.indices.map { index in
            let count = counts[index]
            var bucket = StatisticsBucket(start: edges[index], end: edges[index + 1], count: count)
            switch kind {
            case .cumulative, .category:
                bucket.sum = totals[index]
            case .discrete where count > 0:
                bucket.average = totals[index] / Double(count)
                bucket.minimum = minimums[index]
                bucket.maximum = maximums[index]
            case .discrete:
                break
            }
            return bucket
        }
    }
}

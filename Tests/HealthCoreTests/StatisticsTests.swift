import Foundation
import StorageTestSupport
import Testing

@testable import HealthCore

@Suite struct StatisticsTests {
    let store: HealthStore
    let user: Int64

    init() throws {
        store = try HealthStore.inMemory(using: .testBackend)
        user = try store.createUser(name: "alice").user.id
    }

    /// One 1-step sample of a minute at the top of every UTC hour in `from..<to`.
    func hourly(from: String, to: String) throws {
        var samples: [HealthSample] = []
        var instant = T.ms(from)
        while instant < T.ms(to) {
            samples.append(
                HealthSample(type: .stepCount, value: 1, start: instant, end: instant + 60_000, source: "iPhone"))
            instant += 3_600_000
        }
        _ = try store.add(samples, user: user)
    }

    func stats(
        _ from: String, _ to: String, _ interval: StatisticsInterval? = .day, zone: TimeZone = T.prague,
        unit: HealthUnit? = nil, priority: [String]? = nil
    ) throws -> StatisticsResult {
        try stats(.stepCount, from, to, interval, zone: zone, unit: unit, priority: priority)
    }

    func stats(
        _ type: HealthType, _ from: String, _ to: String, _ interval: StatisticsInterval? = .day,
        zone: TimeZone = T.prague, unit: HealthUnit? = nil, priority: [String]? = nil
    ) throws -> StatisticsResult {
        try store.statistics(
            StatisticsRequest(
                type: type, from: T.ms(from), to: T.ms(to), interval: interval, timeZone: zone, unit: unit,
                sourcePriority: priority), user: user)
    }

    @Test func daysInPragueAcrossSpringForwardHave24_23_24Hours() throws {
        try hourly(from: "2026-03-27T00:00:00Z", to: "2026-04-01T00:00:00Z")
        let result = try stats("2026-03-28T00:00:00+01:00", "2026-03-31T00:00:00+02:00")
        #expect(result.buckets.map(\.sum) == [24, 23, 24])
        #expect(
            result.buckets.map(\.start) == [
                T.ms("2026-03-27T23:00:00Z"), T.ms("2026-03-28T23:00:00Z"), T.ms("2026-03-29T22:00:00Z"),
            ])
        #expect(result.buckets.last?.end == T.ms("2026-03-30T22:00:00Z"))
        // The same day in hours: 23 buckets.
        let hours = try stats("2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", .hour)
        #expect(hours.buckets.count == 23)
        #expect(hours.buckets.allSatisfy { $0.sum == 1 })
    }

    @Test func daysInPragueAcrossFallBackHave24_25_24Hours() throws {
        try hourly(from: "2026-10-23T00:00:00Z", to: "2026-10-28T00:00:00Z")
        let result = try stats("2026-10-24T00:00:00+02:00", "2026-10-27T00:00:00+01:00")
        #expect(result.buckets.map(\.sum) == [24, 25, 24])
        #expect(result.buckets[1].end - result.buckets[1].start == 25 * 3_600_000)
    }

    @Test func aSampleSpanningMidnightIsSplitInProportion() throws {
        // 23:45–00:45 local: a quarter of its time on May 1, three quarters on May 2.
        _ = try store.add(
            [T.sample(.stepCount, 400, "2026-05-01T23:45:00+02:00", "2026-05-02T00:45:00+02:00")], user: user)
        let result = try stats("2026-05-01T00:00:00+02:00", "2026-05-03T00:00:00+02:00")
        #expect(result.buckets.map(\.sum) == [100, 300])
        // In UTC both halves are on May 1.
        let utc = try stats("2026-05-01T00:00:00Z", "2026-05-02T00:00:00Z", zone: T.utc)
        #expect(utc.buckets.map(\.sum) == [400])
    }

    @Test func rangeEdgesOffTheQuarterHourGridCountOnlyWhatIsInside() throws {
        _ = try store.add(
            [("09:00", 1.0), ("09:06", 2), ("09:19", 4), ("09:21", 8)].map {
                T.sample(.stepCount, $0.1, "2026-05-01T\($0.0):00Z", "2026-05-01T\($0.0):30Z")
            }, user: user)
        let result = try stats("2026-05-01T09:05:00Z", "2026-05-01T09:20:00Z", nil, zone: T.utc)
        #expect(result.buckets.map(\.sum) == [6])
    }

    @Test func discreteTypesAverageMinMaxAndDeletionsUpdateThem() throws {
        let low = T.sample(.heartRate, 50, "2026-05-01T08:00:00Z")
        let samples = [
            low, T.sample(.heartRate, 70, "2026-05-01T08:01:00Z"), T.sample(.heartRate, 120, "2026-05-01T18:00:00Z"),
            T.sample(.heartRate, 90, "2026-05-02T08:00:00Z"),
        ]
        _ = try store.add(samples, user: user)
        var result = try stats(.heartRate, "2026-05-01T00:00:00Z", "2026-05-03T00:00:00Z", zone: T.utc)
        #expect(result.unit == .countPerMinute)
        #expect(result.buckets[0].average == 80)
        #expect(result.buckets[0].minimum == 50)
        #expect(result.buckets[0].maximum == 120)
        #expect(result.buckets[0].count == 3)
        #expect(result.buckets[1].average == 90)
        _ = try store.delete([low.uuid], user: user)
        result = try stats(.heartRate, "2026-05-01T00:00:00Z", "2026-05-03T00:00:00Z", zone: T.utc)
        #expect(result.buckets[0].minimum == 70)
        #expect(result.buckets[0].average == 95)
        // An empty bucket has no figures.
        let empty = try stats(.heartRate, "2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z", zone: T.utc)
        #expect(empty.buckets.map(\.count) == [0])
        #expect(empty.buckets[0].average == nil)
    }

    @Test func resultsComeInTheUnitAskedFor() throws {
        _ = try store.add(
            [
                T.sample(.dietaryWater, 250, "2026-05-01T08:00:00Z"),
                T.sample(.dietaryWater, 500, "2026-05-01T12:00:00Z"),
            ], user: user)
        let liters = try stats(.dietaryWater, "2026-05-01T00:00:00Z", "2026-05-02T00:00:00Z", zone: T.utc, unit: .liter)
        #expect(liters.buckets.map(\.sum) == [0.75])
        #expect(throws: HealthError.self) {
            try stats(.dietaryWater, "2026-05-01T00:00:00Z", "2026-05-02T00:00:00Z", unit: .kilogram)
        }
    }

    @Test func sourcePriorityDeduplicatesOverlappingSamples() throws {
        _ = try store.add(
            [
                T.sample(.stepCount, 1000, "2026-05-01T09:00:00Z", "2026-05-01T10:00:00Z", source: "iPhone"),
                T.sample(.stepCount, 600, "2026-05-01T09:30:00Z", "2026-05-01T10:30:00Z", source: "Apple Watch"),
            ], user: user)
        let range = ("2026-05-01T00:00:00Z", "2026-05-02T00:00:00Z")
        #expect(try stats(range.0, range.1, zone: T.utc).buckets.map(\.sum) == [1600])
        // The watch first: all of its 600, and the iPhone's half hour it did not cover.
        #expect(
            try stats(range.0, range.1, zone: T.utc, priority: ["Apple Watch", "iPhone"]).buckets.map(\.sum) == [1100])
        #expect(
            try stats(range.0, range.1, zone: T.utc, priority: ["iPhone", "Apple Watch"]).buckets.map(\.sum) == [1300])
        // Split by hour: 09:00–10:00 has the watch's 300 and the iPhone's 500; 10:00–11:00 the watch's other 300.
        let hourly = try stats(
            "2026-05-01T09:00:00Z", "2026-05-01T11:00:00Z", .hour, zone: T.utc, priority: ["Apple Watch"])
        #expect(hourly.buckets.map(\.sum) == [800, 300])
    }

    @Test func sleepIntervalsAreMergedNotAdded() throws {
        let night = T.sample(
            .sleepAnalysis, Double(SleepValue.asleepCore.rawValue), "2026-05-01T23:00:00+02:00",
            "2026-05-02T07:00:00+02:00", source: "Apple Watch")
        var twin = night
        twin.uuid = UUID()  // the same record twice, as exports have them
        let deep = T.sample(
            .sleepAnalysis, Double(SleepValue.asleepDeep.rawValue), "2026-05-02T01:00:00+02:00",
            "2026-05-02T02:00:00+02:00")
        let inBed = T.sample(
            .sleepAnalysis, Double(SleepValue.inBed.rawValue), "2026-05-01T22:30:00+02:00", "2026-05-02T07:30:00+02:00")
        _ = try store.add([night, twin, deep, inBed], user: user)
        let total = try stats(
            .sleepAnalysis, "2026-05-01T00:00:00+02:00", "2026-05-03T00:00:00+02:00", nil, unit: .hour)
        #expect(total.buckets.map(\.sum) == [8])
        let daily = try stats(.sleepAnalysis, "2026-05-01T00:00:00+02:00", "2026-05-03T00:00:00+02:00")
        #expect(daily.unit == .minute)
        #expect(daily.buckets.map(\.sum) == [60, 420])
        var inBedOnly = StatisticsRequest(
            type: .sleepAnalysis, from: T.ms("2026-05-01T00:00:00Z"), to: T.ms("2026-05-03T00:00:00Z"))
        inBedOnly.sleepValues = [.inBed]
        #expect(try store.statistics(inBedOnly, user: user).buckets.map(\.sum) == [540])
    }

    @Test func weeksStartOnMondayAndMonthsFollowTheCalendar() throws {
        try hourly(from: "2026-01-01T00:00:00Z", to: "2026-04-01T00:00:00Z")
        let weeks = try stats("2026-03-25T12:00:00+01:00", "2026-03-26T00:00:00+01:00", .week)
        #expect(weeks.buckets.map(\.sum) == [12.0])  // the range's part of the week only
        let whole = try stats("2026-03-23T00:00:00+01:00", "2026-03-30T00:00:00+02:00", .week)
        #expect(whole.buckets.map(\.sum) == [167.0])  // a week with the spring-forward Sunday
        let months = try stats("2026-01-01T00:00:00Z", "2026-04-01T00:00:00Z", .month, zone: T.utc)
        #expect(months.buckets.map(\.sum) == [744.0, 672, 744])  // 31, 28 and 31 days of 24
        #expect(
            months.buckets.map(\.start) == ["2026-01-01", "2026-02-01", "2026-03-01"].map { T.ms($0 + "T00:00:00Z") })
    }

    /// The reproduction: by period, a range that cuts its periods counts only what lies inside it, as
    /// HealthKit's collection does; the first and last buckets are the range's parts of their periods.
    @Test func aRangeCuttingItsPeriodsCountsOnlyWhatIsInside() throws {
        try hourly(from: "2026-03-27T00:00:00Z", to: "2026-03-30T00:00:00Z")
        let whole = try stats("2026-03-28T12:00:00+01:00", "2026-03-28T18:00:00+01:00", nil)
        #expect(whole.buckets.map(\.sum) == [6])
        let byDay = try stats("2026-03-28T12:00:00+01:00", "2026-03-28T18:00:00+01:00", .day)
        #expect(byDay.buckets.map(\.sum) == [6])
        #expect(byDay.buckets.map(\.start) == [T.ms("2026-03-28T12:00:00+01:00")])
        #expect(byDay.buckets.map(\.end) == [T.ms("2026-03-28T18:00:00+01:00")])
        // 12:30–14:30 local: the samples at 13:00 and 14:00, in a half hour, an hour and a half hour.
        let byHour = try stats("2026-03-28T12:30:00+01:00", "2026-03-28T14:30:00+01:00", .hour)
        #expect(byHour.buckets.map(\.sum) == [0, 1, 1])
        #expect(byHour.buckets.map { $0.end - $0.start } == [1_800_000, 3_600_000, 1_800_000])
        for period in [StatisticsInterval.week, .month] {
            #expect(
                try stats("2026-03-28T12:30:00+01:00", "2026-03-28T14:30:00+01:00", period).buckets.map(\.sum) == [2])
        }
    }

    @Test func presetsAreWholeLocalDays() {
        let now = T.ms("2026-03-30T10:00:00+02:00")
        let today = StatisticsPreset.today.range(now: now, timeZone: T.prague)
        #expect(today.from == T.ms("2026-03-30T00:00:00+02:00") && today.to == T.ms("2026-03-31T00:00:00+02:00"))
        let week = StatisticsPreset.last7Days.range(now: now, timeZone: T.prague)
        #expect(week.from == T.ms("2026-03-24T00:00:00+01:00") && week.to == today.to)
        let month = StatisticsPreset.last30Days.range(now: now, timeZone: T.prague)
        #expect(month.from == T.ms("2026-03-01T00:00:00+01:00"))
        let thisMonth = StatisticsPreset.thisMonth.range(now: now, timeZone: T.prague)
        #expect(
            thisMonth.from == T.ms("2026-03-01T00:00:00+01:00") && thisMonth.to == T.ms("2026-04-01T00:00:00+02:00"))
    }

    @Test func intervalSetMergesAndReportsGaps() {
        var set = IntervalSet()
        set.insert(10, 20)
        set.insert(30, 40)
        set.insert(15, 32)
        #expect(set.intervals.map { [$0.0, $0.1] } == [[10, 40]])
        set.insert(50, 60)
        #expect(set.uncovered(0, 70).map { [$0.0, $0.1] } == [[0, 10], [40, 50], [60, 70]])
        #expect(set.contains(55) && !set.contains(45) && !set.contains(40))
    }
}

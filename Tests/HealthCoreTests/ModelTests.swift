import Base
import Foundation
import Testing

@testable import HealthCore

@Suite struct UnitTests {
    @Test func conversionsWithinADimension() throws {
        #expect(try HealthUnit.liter.convert(1.5, to: .milliliter) == 1500)
        #expect(abs(try HealthUnit.fluidOunceUS.convert(8, to: .milliliter) - 236.5882365) < 1e-9)
        #expect(abs(try HealthUnit.pound.convert(150, to: .kilogram) - 68.0388555) < 1e-6)
        #expect(abs(try HealthUnit.mile.convert(1, to: .kilometer) - 1.609344) < 1e-12)
        #expect(abs(try HealthUnit.foot.convert(6, to: .meter) - 1.8288) < 1e-12)
        #expect(abs(try HealthUnit.kilojoule.convert(4.184, to: .kilocalorie) - 1) < 1e-12)
        #expect(abs(try HealthUnit.fahrenheit.convert(98.6, to: .celsius) - 37) < 1e-9)
        #expect(abs(try HealthUnit.celsius.convert(-40, to: .fahrenheit) - -40) < 1e-9)
        #expect(try HealthUnit.hour.convert(1.5, to: .minute) == 90)
    }

    @Test func incompatibleUnitsAreInvalidArgument() {
        #expect(throws: HealthError.self) { try HealthUnit.kilogram.convert(1, to: .milliliter) }
        do {
            _ = try HealthSample(type: .dietaryWater, value: 1, unit: .kilogram, start: 0, end: 0, source: "x")
            Issue.record("kg accepted for water")
        } catch {
            #expect(error.category == .invalidArgument)
            #expect(error.message.contains("kg"))
        }
    }

    @Test func samplesStoreTheCanonicalUnit() throws {
        let water = try HealthSample(type: .dietaryWater, value: 0.25, unit: .liter, start: 0, end: 0, source: "x")
        #expect(water.value == 250)
        #expect(try water.value(in: .liter) == 0.25)
        let fever = try HealthSample(
            type: .bodyTemperature, value: 100.4, unit: .fahrenheit, start: 0, end: 0, source: "x")
        #expect(abs(fever.value - 38) < 1e-9)
    }

    @Test func unitAndTypeNamesParse() throws {
        #expect(try HealthUnit.parse("fl_oz_us") == .fluidOunceUS)
        #expect(try HealthUnit.parse("count/min") == .countPerMinute)
        #expect(throws: HealthError.self) { try HealthUnit.parse("furlong") }
        #expect(try HealthType.parse("stepCount") == .stepCount)
        #expect(try HealthType.parse("HKQuantityTypeIdentifierHeartRate") == .heartRate)
        #expect(HealthType.sleepAnalysis.healthKitIdentifier == "HKCategoryTypeIdentifierSleepAnalysis")
        #expect(SleepValue(name: "HKCategoryValueSleepAnalysisAsleepREM") == .asleepREM)
        #expect(SleepValue(name: "HKCategoryValueSleepAnalysisAsleep") == .asleepUnspecified)
        #expect(Set(HealthType.allCases.map(\.code)).count == HealthType.allCases.count)
    }
}

@Suite struct ValidationTests {
    func failure(_ sample: HealthSample) -> HealthError? {
        do {
            try sample.validate()
            return nil
        } catch { return error }
    }

    @Test func reasonsAreNamed() {
        #expect(
            failure(T.sample(.stepCount, 10, "2026-05-01T10:00:00Z", "2026-05-01T09:00:00Z"))?.message.contains(
                "before start") == true)
        #expect(failure(T.sample(.stepCount, .nan, "2026-05-01T10:00:00Z"))?.message.contains("finite") == true)
        #expect(failure(T.sample(.stepCount, .infinity, "2026-05-01T10:00:00Z")) != nil)
        #expect(failure(T.sample(.stepCount, -1, "2026-05-01T10:00:00Z"))?.message.contains("outside") == true)
        #expect(failure(T.sample(.heartRate, 0, "2026-05-01T10:00:00Z")) != nil)
        #expect(failure(T.sample(.heartRate, 301, "2026-05-01T10:00:00Z")) != nil)
        #expect(failure(T.sample(.heartRate, 300, "2026-05-01T10:00:00Z")) == nil)
        #expect(failure(T.sample(.sleepAnalysis, 6, "2026-05-01T10:00:00Z"))?.message.contains("outside") == true)
        #expect(failure(T.sample(.sleepAnalysis, 2.5, "2026-05-01T10:00:00Z"))?.message.contains("category") == true)
        #expect(failure(T.sample(.sleepAnalysis, 5, "2026-05-01T10:00:00Z")) == nil)
        #expect(
            failure(T.sample(.stepCount, 1, "2026-05-01T10:00:00Z", zone: "Mars/Olympus"))?.message.contains("zone")
                == true)
        #expect(failure(T.sample(.stepCount, 1, "2026-05-01T10:00:00Z", zone: "-0700")) == nil)
        var seconds = T.sample(.stepCount, 1, "2026-05-01T10:00:00Z")
        seconds.start = 1_777_000_000_000_000  // microseconds sent as milliseconds
        seconds.end = seconds.start
        #expect(failure(seconds) != nil)
        var huge = T.sample(.stepCount, 1, "2026-05-01T10:00:00Z")
        huge.metadata = [MetadataEntry("note", String(repeating: "x", count: 10 << 20))]
        #expect(failure(huge)?.message.contains("metadata") == true)
    }

    @Test func oneBadSampleRejectsTheBatchNamingIt() {
        let bad = T.sample(.heartRate, 500, "2026-05-01T10:00:00Z")
        let batch = [T.sample(.heartRate, 60, "2026-05-01T09:00:00Z"), bad]
        do {
            try HealthSample.validate(batch: batch)
            Issue.record("accepted")
        } catch {
            #expect(error.category == .invalidArgument)
            #expect(error.message.contains("#1"))
            #expect(error.message.contains(bad.uuid.uuidString.lowercased()))
        }
    }

    @Test func anOversizedBatchIsResourceExhausted() {
        var limits = SampleLimits()
        limits.maxBatchSamples = 3
        let batch = (0..<4).map { _ in T.sample(.stepCount, 1, "2026-05-01T09:00:00Z") }
        #expect(throws: HealthError(.resourceExhausted, "a batch of 4 samples is over the limit of 3; split it")) {
            try HealthSample.validate(batch: batch, limits)
        }
    }
}

@Suite struct TimestampTests {
    @Test func exportAndISOFormsParse() {
        let export = Timestamps.parse("2026-05-01 09:14:23 -0700")
        #expect(export?.0 == T.ms("2026-05-01T16:14:23Z"))
        #expect(export?.offset == -25200)
        #expect(Timestamps.parse("2026-05-01T09:14:23.250+02:00")?.0 == T.ms("2026-05-01T07:14:23.250Z"))
        #expect(Timestamps.parse("1969-12-31T23:59:59Z")?.0 == -1000)
        for garbage in [
            "2026-13-01 00:00:00 +0000", "2026-02-30T00:00:00Z", "2026-05-01", "yesterday", "2026-05-01T25:00:00Z",
            "2026-05-01T10:00:00",
        ] {
            #expect(Timestamps.parse(garbage) == nil, "\(garbage)")
        }
    }

    @Test func formatRoundTrips() {
        #expect(Timestamps.format(T.ms("2024-02-29T23:59:59.005Z")) == "2024-02-29T23:59:59.005Z")
        #expect(Timestamps.format(T.ms("2026-05-01T16:14:23Z"), offset: -25200) == "2026-05-01T09:14:23-07:00")
        #expect(Timestamps.format(-1) == "1969-12-31T23:59:59.999Z")
    }
}

/// Deterministic UUIDs (from a SHA-256 of the name) for samples that arrive without one.
@Suite struct NamedUUIDTests {
    @Test func namedUUIDsAreStableVersion8() {
        let first = UUID.named("stepCount|iPhone|2026".utf8)
        #expect(first == UUID.named("stepCount|iPhone|2026".utf8))
        #expect(first != UUID.named("stepCount|iPhone|2027".utf8))
        #expect(first.uuidString.lowercased().dropFirst(14).first == "8")
    }
}

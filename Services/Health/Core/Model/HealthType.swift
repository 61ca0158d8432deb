/// The sample types the service models, named by HealthKit's identifiers without their prefix
/// (`stepCount` is `HKQuantityTypeIdentifierStepCount`).
///
/// `code` is what the database stores: stable forever, never reused, independent of declaration order.
public enum HealthType: String, Sendable, Hashable, CaseIterable, Comparable {
    case stepCount, distanceWalkingRunning, flightsClimbed, activeEnergyBurned, dietaryWater
    case heartRate, bodyMass, height, bodyTemperature, oxygenSaturation, bloodGlucose
    case bloodPressureSystolic, bloodPressureDiastolic
    case sleepAnalysis

    /// How samples of a type combine, as HealthKit's `HKQuantityAggregationStyle` (plus categories).
    public enum Kind: Sendable, Hashable {
        /// Values add up over time (steps, water): statistics sum them.
        case cumulative
        /// Values are measurements at a time (heart rate, weight): statistics average, min and max.
        case discrete
        /// A category value over an interval (sleep stages): statistics merge the intervals.
        case category
    }

    public var kind: Kind {
        switch self {
        case .stepCount, .distanceWalkingRunning, .flightsClimbed, .activeEnergyBurned, .dietaryWater: .cumulative
        case .sleepAnalysis: .category
        default: .discrete
        }
    }

    /// The unit values are stored in. Categories store the category's raw value, "count" by convention.
    public var canonicalUnit: HealthUnit {
        switch self {
        case .stepCount, .flightsClimbed, .sleepAnalysis: .count
        case .distanceWalkingRunning, .height: .meter
        case .activeEnergyBurned: .kilocalorie
        case .dietaryWater: .milliliter
        case .heartRate: .countPerMinute
        case .bodyMass: .kilogram
        case .bodyTemperature: .celsius
        case .oxygenSaturation: .percent
        case .bloodGlucose: .milligramPerDeciliter
        case .bloodPressureSystolic, .bloodPressureDiastolic: .millimeterOfMercury
        }
    }

    /// The unit statistics are reported in by default: sleep reports merged time, in minutes.
    public var statisticsUnit: HealthUnit { self == .sleepAnalysis ? .minute : canonicalUnit }

    /// Values a real sample of this type can have, in the canonical unit. Outside → INVALID_ARGUMENT.
    /// Wide on purpose (one sample may cover a long interval): it catches unit mix-ups and garbage, not outliers.
    public var plausibleRange: ClosedRange<Double> {
        switch self {
        case .stepCount: 0...1_000_000
        case .distanceWalkingRunning: 0...1_000_000
        case .flightsClimbed: 0...10_000
        case .activeEnergyBurned: 0...100_000
        case .dietaryWater: 0...20_000
        case .heartRate: 1...300
        case .bodyMass: 0.5...700
        case .height: 0.2...3
        case .bodyTemperature: 25...45
        case .oxygenSaturation: 0...1
        case .bloodGlucose: 5...2_000
        case .bloodPressureSystolic: 20...300
        case .bloodPressureDiastolic: 10...250
        case .sleepAnalysis: 0...Double(SleepValue.allCases.count - 1)
        }
    }

    /// The stable database code.
    public var code: Int {
        switch self {
        case .stepCount: 1
        case .distanceWalkingRunning: 2
        case .flightsClimbed: 3
        case .activeEnergyBurned: 4
        case .dietaryWater: 5
        case .heartRate: 20
        case .bodyMass: 21
        case .height: 22
        case .bodyTemperature: 23
        case .oxygenSaturation: 24
        case .bloodGlucose: 25
        case .bloodPressureSystolic: 26
        case .bloodPressureDiastolic: 27
        case .sleepAnalysis: 40
        }
    }

    private static let byCode = Dictionary(uniqueKeysWithValues: allCases.map { ($0.code, $0) })

    /// The type stored as `code`, or nil for a code this program does not know.
    public init?(code: Int) {
        guard let type = Self.byCode[code] else { return nil }
        self = type
    }

    /// HealthKit's full identifier (`HKQuantityTypeIdentifierStepCount`), as exports spell it.
    public var healthKitIdentifier: String {
        let prefix = kind == .category ? "HKCategoryTypeIdentifier" : "HKQuantityTypeIdentifier"
        return prefix + rawValue.prefix(1).uppercased() + rawValue.dropFirst()
    }

    private static let byHealthKitIdentifier = Dictionary(
        uniqueKeysWithValues: allCases.map { ($0.healthKitIdentifier, $0) })

    /// The type named either `stepCount` or `HKQuantityTypeIdentifierStepCount`; INVALID_ARGUMENT otherwise.
    public static func parse(_ name: String) throws(HealthError) -> HealthType {
        if let type = HealthType(rawValue: name) ?? byHealthKitIdentifier[name] { return type }
        throw .invalid("unknown sample type \"\(name)\"")
    }

    /// The type for an export's `type` attribute, nil when the service does not model it.
    public init?(healthKitIdentifier: String) {
        guard let type = Self.byHealthKitIdentifier[healthKitIdentifier] else { return nil }
        self = type
    }

    public static func < (lhs: HealthType, rhs: HealthType) -> Bool { lhs.code < rhs.code }
}

/// `HKCategoryValueSleepAnalysis`, with HealthKit's raw values.
public enum SleepValue: Int, Sendable, Hashable, CaseIterable {
    case inBed = 0, asleepUnspecified = 1, awake = 2, asleepCore = 3, asleepDeep = 4, asleepREM = 5

    /// Asleep in any stage (what "time asleep" counts).
    public var isAsleep: Bool {
        switch self {
        case .asleepUnspecified, .asleepCore, .asleepDeep, .asleepREM: true
        case .inBed, .awake: false
        }
    }

    public var name: String { String(describing: self) }

    /// `asleepCore`, or the export's `HKCategoryValueSleepAnalysisAsleepCore`; the pre-iOS 16 `Asleep` is
    /// `asleepUnspecified`, as HealthKit maps it.
    public init?(name: String) {
        var short = name
        if short.hasPrefix("HKCategoryValueSleepAnalysis") {
            short = String(short.dropFirst("HKCategoryValueSleepAnalysis".count))
            short = short.prefix(1).lowercased() + short.dropFirst()
        }
        if short == "asleep" { short = "asleepUnspecified" }
        guard let value = SleepValue.allCases.first(where: { $0.name == short }) else { return nil }
        self = value
    }
}

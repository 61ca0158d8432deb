/// What a unit measures; values convert only between units of the same dimension.
public enum UnitDimension: String, Sendable, Hashable {
    case count, frequency, volume, mass, length, energy, temperature, fraction, pressure, bloodGlucose, time
}

/// A unit HealthKit-style: a symbol (`mL`, `count/min`, `degF`), its dimension, and the affine map to the
/// dimension's base unit (`base = value * factor + offset`; the offset is only for temperatures).
public struct HealthUnit: Sendable, Hashable, CustomStringConvertible {
    public let symbol: String
    public let dimension: UnitDimension
    let factor: Double
    let offset: Double

    init(_ symbol: String, _ dimension: UnitDimension, factor: Double = 1, offset: Double = 0) {
        self.symbol = symbol
        self.dimension = dimension
        self.factor = factor
        self.offset = offset
    }

    public var description: String { symbol }

    public static let count = HealthUnit("count", .count)
    public static let countPerMinute = HealthUnit("count/min", .frequency)
    public static let milliliter = HealthUnit("mL", .volume)
    public static let liter = HealthUnit("L", .volume, factor: 1000)
    public static let fluidOunceUS = HealthUnit("fl_oz_us", .volume, factor: 29.5735295625)
    public static let kilogram = HealthUnit("kg", .mass)
    public static let gram = HealthUnit("g", .mass, factor: 0.001)
    public static let pound = HealthUnit("lb", .mass, factor: 0.45359237)
    public static let meter = HealthUnit("m", .length)
    public static let centimeter = HealthUnit("cm", .length, factor: 0.01)
    public static let kilometer = HealthUnit("km", .length, factor: 1000)
    public static let mile = HealthUnit("mi", .length, factor: 1609.344)
    public static let foot = HealthUnit("ft", .length, factor: 0.3048)
    public static let kilocalorie = HealthUnit("kcal", .energy)
    public static let kilojoule = HealthUnit("kJ", .energy, factor: 1 / 4.184)
    public static let celsius = HealthUnit("degC", .temperature)
    public static let fahrenheit = HealthUnit("degF", .temperature, factor: 5.0 / 9.0, offset: -32 * 5.0 / 9.0)
    /// HealthKit's percent: a fraction, 0.97 is 97 %.
    public static let percent = HealthUnit("%", .fraction)
    public static let millimeterOfMercury = HealthUnit("mmHg", .pressure)
    public static let milligramPerDeciliter = HealthUnit("mg/dL", .bloodGlucose)
    /// Glucose only (molar mass 180.156 g/mol): what exports outside the US carry.
    public static let millimolePerLiterGlucose = HealthUnit("mmol/L", .bloodGlucose, factor: 18.0156)
    public static let second = HealthUnit("s", .time, factor: 1.0 / 60)
    public static let minute = HealthUnit("min", .time)
    public static let hour = HealthUnit("h", .time, factor: 60)

    public static let all: [HealthUnit] = [
        count, countPerMinute, milliliter, liter, fluidOunceUS, kilogram, gram, pound, meter, centimeter, kilometer,
        mile, foot, kilocalorie, kilojoule, celsius, fahrenheit, percent, millimeterOfMercury,
        milligramPerDeciliter, millimolePerLiterGlucose, second, minute, hour,
    ]

    private static let bySymbol: [String: HealthUnit] = {
        var table = Dictionary(uniqueKeysWithValues: all.map { ($0.symbol, $0) })
        // Spellings HealthKit's `HKUnit(from:)` and Apple's exports use for the same units.
        table["l"] = liter
        table["ml"] = milliliter
        table["Cal"] = kilocalorie
        table["cal"] = nil
        table["count/s"] = nil
        table["mmol<180.1558800000541>/L"] = millimolePerLiterGlucose
        table["bpm"] = countPerMinute
        return table
    }()

    /// The unit spelled `symbol`, or INVALID_ARGUMENT naming it.
    public static func parse(_ symbol: String) throws(HealthError) -> HealthUnit {
        guard let unit = bySymbol[symbol] else { throw .invalid("unknown unit \"\(symbol)\"") }
        return unit
    }

    /// `value` in this unit expressed in `other`; INVALID_ARGUMENT when the dimensions differ (kg → mL).
    public func convert(_ value: Double, to other: HealthUnit) throws(HealthError) -> Double {
        guard dimension == other.dimension else {
            throw .invalid(
                "cannot convert \(symbol) (\(dimension.rawValue)) to \(other.symbol) (\(other.dimension.rawValue))")
        }
        if self == other { return value }
        return ((value * factor + offset) - other.offset) / other.factor
    }
}

import Foundation

/// A value a template reads from every photo: its name, where it sat in the template's first photo, what it
/// looked like there and the label beside it.
public struct ValueDefinition: Sendable, Hashable {
    public var name: String
    /// The region as fractions of the upright image, top-left origin.
    public var region: NormalizedRect
    /// The level of the observation the value was picked from: a value is matched against observations of the
    /// same level (a word such as `12.6`, or a whole line such as `12.6 V`).
    public var level: ObservationLevel
    /// The value's shape with its unit (`ValueShape.skeleton`, e.g. `#.#V`); empty for a template made before
    /// shapes were learned, which is matched by position alone.
    public var shape: String
    /// The text to the value's left on the first photo (`Napětí`), empty when there was none.
    public var label: String

    public init(
        name: String, region: NormalizedRect, level: ObservationLevel = .word, shape: String = "", label: String = ""
    ) {
        self.name = name
        self.region = region
        self.level = level
        self.shape = shape
        self.label = label
    }

    /// The value that sits where `observation` is, with its shape and label learned from the photo's other
    /// observations (`among`; none: position only).
    public init(name: String, observation: Observation, among observations: [Observation] = []) {
        if observations.isEmpty {
            self.init(name: name, region: observation.normalizedBox, level: observation.level)
        } else {
            let neighbourhood = ValueNeighbourhood(of: observation, among: observations)
            self.init(
                name: name, region: observation.normalizedBox, level: observation.level, shape: neighbourhood.shape,
                label: neighbourhood.label)
        }
    }
}

/// A kind of photo (a battery monitor's display, a meter) and the values read from each photo of it.
public struct Template: Sendable, Hashable {
    public var id: Int64
    public var name: String
    public var description: String
    public var createdAt: Date
    /// In the order of the CSV columns.
    public var values: [ValueDefinition]

    public init(id: Int64, name: String, description: String, createdAt: Date, values: [ValueDefinition]) {
        self.id = id
        self.name = name
        self.description = description
        self.createdAt = createdAt
        self.values = values
    }

    public static let maxNameLength = 200
    public static let maxValues = 100

    /// Throws INVALID_ARGUMENT for an empty or overlong name, no values, duplicate or empty value names, or a
    /// region outside the image.
    static func validate(name: String, description: String = "", values: [ValueDefinition]) throws {
        try validateName(name, what: "template name")
        try validateLength(description, max: maxDescriptionLength, what: "description")
        if values.isEmpty { throw OCRError.invalid("a template needs at least one value") }
        if values.count > maxValues { throw OCRError.invalid("a template has at most \(maxValues) values") }
        try validateValueNames(values.map(\.name))
        for value in values {
            guard value.region.isValid else {
                throw OCRError.invalid(
                    "the region of value \"\(value.name)\" must lie within the image (fractions 0–1)")
            }
            try validateLength(
                value.shape, max: ValueShape.maxLabelLength, what: "the shape of value \"\(value.name)\"")
            try validateLength(
                value.label, max: ValueShape.maxLabelLength, what: "the label of value \"\(value.name)\"")
        }
    }

    public static let maxDescriptionLength = 2000
    public static let maxValueTextLength = 1000

    static func validateName(_ name: String, what: String) throws {
        try validateLength(name, max: maxNameLength, what: what)
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty { throw OCRError.invalid("\(what) must not be empty") }
    }

    /// At most `max` Unicode scalars, no NUL. Scalars, not characters: "a" followed by millions of combining
    /// accents is one character, and counting them costs seconds; the UTF-8 length bounds the count first.
    static func validateLength(_ text: String, max: Int, what: String) throws {
        guard text.utf8.count <= 4 * max, text.unicodeScalars.count <= max else {
            throw OCRError.invalid("\(what) is longer than \(max) characters")
        }
        if text.utf8.contains(0) { throw OCRError.invalid("\(what) must not contain NUL") }
    }

    static func validateValueNames(_ names: [String]) throws {
        var seen: Set<String> = []
        for name in names {
            try validateName(name, what: "value name")
            guard seen.insert(name).inserted else { throw OCRError.invalid("value name \"\(name)\" is used twice") }
        }
    }
}

/// One value of a record: the text read (or corrected by the user), normalised (`ValueText`: `224.5v` is `224.5`
/// with unit `V`), the text as read beside it, the recogniser's confidence (0 for an empty value; 1 when the user
/// typed it) and, when the reading wants a person's look, why.
public struct RecordValue: Sendable, Hashable {
    public var name: String
    public var text: String
    public var confidence: Double
    /// Why the value is uncertain (nothing fitted well, it fitted two values, low confidence), empty when it is
    /// not: stored with the record and exported, so a flagged value is never mistaken for a checked one.
    public var uncertainty: String
    /// The text as read or typed, before `ValueText.normalise` (empty: the same as `text`).
    public var raw: String
    /// The unit split off the reading (`V` of `224.5v`) or read beside it, empty when there was none.
    public var unit: String

    public init(
        name: String, text: String, confidence: Double, uncertainty: String = "", raw: String = "", unit: String = ""
    ) {
        self.name = name
        self.text = text
        self.confidence = confidence
        self.uncertainty = uncertainty
        self.raw = raw
        self.unit = unit
    }

    /// A reading as stored: `raw` normalised into `text` and `unit` (the unit read beside it when the text had
    /// none).
    public static func reading(
        name: String, raw: String, confidence: Double, uncertainty: String = "", unitBeside: String = ""
    ) -> RecordValue {
        let (text, unit) = ValueText.normalise(raw)
        let beside = unitBeside.count == 1 ? unitBeside.uppercased() : unitBeside
        return RecordValue(
            name: name, text: text, confidence: confidence, uncertainty: uncertainty, raw: raw,
            unit: unit.isEmpty ? beside : unit)
    }

    /// The value as it is stored: its text normalised (a person's correction too), the text received kept as the
    /// raw when none was given.
    public var normalised: RecordValue {
        let (text, unit) = ValueText.normalise(self.text)
        return RecordValue(
            name: name, text: text, confidence: confidence, uncertainty: uncertainty,
            raw: raw.isEmpty ? self.text : raw,
            unit: unit.isEmpty ? self.unit : unit)
    }

    public var isUncertain: Bool { !uncertainty.isEmpty }
}

/// Where a record's date came from; the CSV says it beside the date.
public enum DateSource: String, Sendable, Hashable, CaseIterable {
    /// Typed by a person.
    case given
    /// The photo's EXIF DateTimeOriginal.
    case exif
    /// When the record was saved (and every record saved before dates had sources).
    case upload

    /// A record's date lies between 1970 and a day from now: a later one is a typo or a camera whose clock was
    /// never set, and the CSV's order would put it after every real record.
    public static func validate(_ date: Date, now: Date = Date()) throws {
        let seconds = date.timeIntervalSince1970
        guard seconds.isFinite, seconds >= 0 else {
            throw OCRError.invalid("a record's date must not be before 1970-01-01")
        }
        guard seconds <= now.timeIntervalSince1970 + 86_400 else {
            throw OCRError.invalid("a record's date must not be more than a day in the future")
        }
    }
}

/// The values of one photo, saved with the time it was taken (as far as is known: `dateSource` says how).
public struct Record: Sendable, Hashable {
    public var id: Int64
    public var templateID: Int64
    public var createdAt: Date
    /// In the template's value order.
    public var values: [RecordValue]
    public var dateSource: DateSource

    public init(id: Int64, templateID: Int64, createdAt: Date, values: [RecordValue], dateSource: DateSource = .upload)
    {
        self.id = id
        self.templateID = templateID
        self.createdAt = createdAt
        self.values = values
        self.dateSource = dateSource
    }
}

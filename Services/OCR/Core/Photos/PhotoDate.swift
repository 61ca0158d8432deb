import Foundation

/// When a photo was taken, as its EXIF says: `DateTimeOriginal` (the camera's local time) with
/// `OffsetTimeOriginal` when the camera wrote one (phones do since EXIF 2.31) and `SubSecTimeOriginal`'s
/// milliseconds. Without an offset the zone is unknown here: the client that knows where the photos were taken
/// decides (the gateway takes its own local zone).
public struct PhotoDate: Sendable, Hashable {
    public var year, month, day, hour, minute, second: Int
    public var millisecond: Int
    /// Seconds east of UTC, nil when the photo does not say.
    public var offsetSeconds: Int?

    /// ISO 8601: `2026-11-22T14:05:09`, `2026-11-22T14:05:09.120`, `2026-11-22T14:05:09+01:00`.
    public var iso8601: String {
        var text = String(format: "%04d-%02d-%02dT%02d:%02d:%02d", year, month, day, hour, minute, second)
        if millisecond > 0 { text += String(format: ".%03d", millisecond) }
        if let offsetSeconds {
            let minutes = abs(offsetSeconds) / 60
            text += String(format: "%@%02d:%02d", offsetSeconds < 0 ? "-" : "+", minutes / 60, minutes % 60)
        }
        return text
    }

    /// The instant, with `offsetSeconds` or else `zone`.
    public func date(in zone: TimeZone) -> Date? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = offsetSeconds.flatMap(TimeZone.init(secondsFromGMT:)) ?? zone
        let components = DateComponents(
            year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        return calendar.date(from: components).map { $0.addingTimeInterval(Double(millisecond) / 1000) }
    }

    /// `2026:11:22 14:05:09` (EXIF's own format) and an optional `+01:00` / `-05:30` and sub-second digits; nil
    /// for anything else, including the `0000:00:00 00:00:00` cameras write when their clock was never set.
    init?(exif text: String, offset: String?, subseconds: String?) {
        let scalars = Array(text.utf8)
        guard scalars.count == 19 else { return nil }
        func number(_ from: Int, _ length: Int) -> Int? {
            var value = 0
            for byte in scalars[from..<(from + length)] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        for (index, separator) in [(4, ":"), (7, ":"), (10, " "), (13, ":"), (16, ":")]
        where scalars[index] != UInt8(ascii: separator.unicodeScalars.first!) {
            return nil
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
            let minute = number(14, 2), let second = number(17, 2),
            (1...9999).contains(year), (1...12).contains(month),
            (1...Self.days(inMonth: month, year: year)).contains(day),
            hour < 24, minute < 60, second < 61
        else { return nil }
        (self.year, self.month, self.day, self.hour, self.minute, self.second) = (
            year, month, day, hour, minute, min(second, 59)
        )
        millisecond = 0
        if let subseconds {
            let digits = subseconds.trimmingCharacters(in: .whitespaces)
            if !digits.isEmpty, digits.utf8.count <= 9, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
                millisecond = Int((digits + "00").prefix(3)) ?? 0
            }
        }
        offsetSeconds = offset.flatMap(Self.offset)
    }

    /// `+01:00` → 3600; nil for anything else (EXIF allows `   :  ` for unknown).
    static func offset(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        guard bytes.count == 6, bytes[0] == UInt8(ascii: "+") || bytes[0] == UInt8(ascii: "-"),
            bytes[3] == UInt8(ascii: ":"),
            let hours = Int(String(decoding: bytes[1..<3], as: UTF8.self)),
            let minutes = Int(String(decoding: bytes[4..<6], as: UTF8.self)),
            bytes[1...2].allSatisfy({ (0x30...0x39).contains($0) }),
            bytes[4...5].allSatisfy({ (0x30...0x39).contains($0) }),
            hours <= 14, minutes < 60
        else { return nil }
        return (bytes[0] == UInt8(ascii: "-") ? -1 : 1) * (hours * 3600 + minutes * 60)
    }

    static func days(inMonth month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}

/// Reads `PhotoDate` from a JPEG's APP1 Exif segment or a PNG's eXIf chunk, nothing else: a few tags are all a
/// record needs, and a reader that knows only them is small enough to check. Bounded and defensive: it walks at
/// most `maxSegments` segments or chunks, follows no IFD offset outside the EXIF block, reads at most
/// `maxEntries` entries of an IFD, and answers nil for anything truncated or malformed (a photo without a usable
/// date gets the upload time; it is never refused for its metadata).
public enum PhotoDateReader {
    static let maxSegments = 256
    static let maxEntries = 512

    public static func read(_ data: Data) -> PhotoDate? {
        let bytes = Bytes(data: data)
        if bytes.count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 { return jpeg(bytes) }
        if bytes.count >= 8, (0..<8).allSatisfy({ bytes[$0] == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A][$0] }) {
            return png(bytes)
        }
        return nil
    }

    /// Segments from SOI to the start of scan: the Exif APP1 comes first in practice, but a JFIF APP0 may precede it.
    static func jpeg(_ bytes: Bytes) -> PhotoDate? {
        var position = 2
        for _ in 0..<maxSegments {
            guard position + 4 <= bytes.count, bytes[position] == 0xFF else { return nil }
            let marker = bytes[position + 1]
            if marker == 0xFF {
                position += 1
                continue
            }  // fill byte
            if marker == 0xDA || marker == 0xD9 { return nil }  // start of scan, end of image: no more metadata
            let length = bytes.uint16(at: position + 2, bigEndian: true)
            guard length >= 2, position + 2 + length <= bytes.count else { return nil }
            let body = position + 4, bodyLength = length - 2
            if marker == 0xE1, bodyLength >= 14,
                (0..<6).allSatisfy({ bytes[body + $0] == Array("Exif\0\0".utf8)[$0] })
            {
                return tiff(bytes.slice(body + 6, bodyLength - 6))
            }
            position += 2 + length
        }
        return nil
    }

    static func png(_ bytes: Bytes) -> PhotoDate? {
        var position = 8
        for _ in 0..<maxSegments {
            guard position + 12 <= bytes.count else { return nil }
            let length = bytes.uint32(at: position, bigEndian: true)
            guard length <= bytes.count - position - 12 else { return nil }
            let type = String(decoding: (4..<8).map { bytes[position + $0] }, as: UTF8.self)
            if type == "eXIf" { return tiff(bytes.slice(position + 8, length)) }
            if type == "IEND" { return nil }
            position += 12 + length
        }
        return nil
    }

    /// A TIFF block: byte order, IFD0 → the Exif IFD (tag 0x8769) → DateTimeOriginal (0x9003),
    /// OffsetTimeOriginal (0x9011), SubSecTimeOriginal (0x9291).
    static func tiff(_ tiff: Bytes) -> PhotoDate? {
        guard tiff.count >= 8 else { return nil }
        let bigEndian: Bool
        switch (tiff[0], tiff[1]) {
        case (0x4D, 0x4D): bigEndian = true
        case (0x49, 0x49): bigEndian = false
        default: return nil
        }
        guard tiff.uint16(at: 2, bigEndian: bigEndian) == 42 else { return nil }
        let ifd0 = entries(tiff, at: tiff.uint32(at: 4, bigEndian: bigEndian), bigEndian: bigEndian)
        guard let pointer = ifd0?[0x8769], pointer.type == 4, pointer.count == 1,
            let exif = entries(tiff, at: pointer.inline, bigEndian: bigEndian),
            let original = exif[0x9003].flatMap({ ascii(tiff, $0, bigEndian: bigEndian) })
        else { return nil }
        return PhotoDate(
            exif: original, offset: exif[0x9011].flatMap { ascii(tiff, $0, bigEndian: bigEndian) },
            subseconds: exif[0x9291].flatMap { ascii(tiff, $0, bigEndian: bigEndian) })
    }

    struct Entry {
        var type: Int, count: Int, inline: Int, offsetField: Int
    }

    static func entries(_ tiff: Bytes, at offset: Int, bigEndian: Bool) -> [Int: Entry]? {
        guard offset >= 8, offset + 2 <= tiff.count else { return nil }
        let count = tiff.uint16(at: offset, bigEndian: bigEndian)
        guard count <= maxEntries, offset + 2 + count * 12 <= tiff.count else { return nil }
        var entries: [Int: Entry] = [:]
        for index in 0..<count {
            let at = offset + 2 + index * 12
            entries[tiff.uint16(at: at, bigEndian: bigEndian)] = Entry(
                type: tiff.uint16(at: at + 2, bigEndian: bigEndian),
                count: tiff.uint32(at: at + 4, bigEndian: bigEndian),
                inline: tiff.uint32(at: at + 8, bigEndian: bigEndian), offsetField: at + 8)
        }
        return entries
    }

    /// An ASCII (type 2) value up to its NUL: inline when it fits in 4 bytes, else at its offset.
    static func ascii(_ tiff: Bytes, _ entry: Entry, bigEndian: Bool) -> String? {
        guard entry.type == 2, entry.count >= 1, entry.count <= 64 else { return nil }
        let start = entry.count <= 4 ? entry.offsetField : entry.inline
        guard start >= 0, start + entry.count <= tiff.count else { return nil }
        let raw = (0..<entry.count).map { tiff[start + $0] }
        let text = raw.prefix { $0 != 0 }
        guard text.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        return String(decoding: text, as: UTF8.self)
    }

    /// A window on `Data` that indexes from 0 whatever the data's start index (an upload is a slice).
    struct Bytes {
        let data: Data
        let start: Int
        let count: Int

        init(data: Data) { (self.data, start, count) = (data, data.startIndex, data.count) }
        private init(data: Data, start: Int, count: Int) { (self.data, self.start, self.count) = (data, start, count) }

        subscript(index: Int) -> UInt8 { data[start + index] }

        func slice(_ from: Int, _ length: Int) -> Bytes { Bytes(data: data, start: start + from, count: length) }

        func uint16(at index: Int, bigEndian: Bool) -> Int {
            let a = Int(self[index]), b = Int(self[index + 1])
            return bigEndian ? a << 8 | b : b << 8 | a
        }

        func uint32(at index: Int, bigEndian: Bool) -> Int {
            let bytes = (0..<4).map { Int(self[index + $0]) }
            return bigEndian
                ? bytes[0] << 24 | bytes[1] << 16 | bytes[2] << 8 | bytes[3]
                : bytes[3] << 24 | bytes[2] << 16 | bytes[1] << 8 | bytes[0]
        }
    }
}

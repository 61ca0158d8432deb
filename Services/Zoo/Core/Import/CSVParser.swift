/// One record of a delimiter-separated file.
public struct CSVRecord: Sendable, Equatable {
    /// 1-based line of the file where the record starts.
    public var line: Int
    /// The record's fields, unquoted, not trimmed.
    public var fields: [String]

    public init(line: Int, fields: [String]) {
        self.line = line
        self.fields = fields
    }
}

/// A lenient RFC 4180 parser for delimiter-separated text as found in open-data exports.
///
/// Handles quoted fields with doubled quotes, line breaks inside quoted fields (CRLF normalised to LF),
/// LF/CRLF/CR record ends, a UTF-8 byte-order mark and blank lines (skipped). A quote inside a quoted
/// field that is not followed by a delimiter or a line end is kept as a literal character, which
/// recovers records whose text contains unescaped quotes; after such a stray opening quote, `""` at
/// the end of the field reads as the stray closing quote followed by the field's closing quote.
public enum CSVParser {
    private static let quote = UInt8(ascii: "\"")
    private static let lineFeed = UInt8(ascii: "\n")
    private static let carriageReturn = UInt8(ascii: "\r")

    /// Parses `text` into records.
    public static func parse(_ text: String, delimiter: Character = ";") -> [CSVRecord] {
        parse(bytes: Array(text.utf8), delimiter: delimiter)
    }

    /// Parses UTF-8 `bytes` into records.
    public static func parse(bytes input: [UInt8], delimiter: Character = ";") -> [CSVRecord] {
        precondition(delimiter.isASCII, "the delimiter must be an ASCII character")
        let separator = delimiter.asciiValue!
        var bytes = input[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }

        var records: [CSVRecord] = []
        var fields: [String] = []
        var field: [UInt8] = []
        var line = 1
        var recordLine = 1
        var index = bytes.startIndex
        let end = bytes.endIndex

        func finishField() {
            fields.append(String(decoding: field, as: UTF8.self))
            field.removeAll(keepingCapacity: true)
        }
        func finishRecord() {
            finishField()
            if !(fields.count == 1 && fields[0].isEmpty) {
                records.append(CSVRecord(line: recordLine, fields: fields))
            }
            fields.removeAll(keepingCapacity: true)
        }
        func isFieldEnd(_ position: Int) -> Bool {
            var probe = position
            while probe < end, bytes[probe] == UInt8(ascii: " ") || bytes[probe] == UInt8(ascii: "\t") { probe += 1 }
            return probe == end || bytes[probe] == separator || bytes[probe] == lineFeed
                || bytes[probe] == carriageReturn
        }

        var atFieldStart = true
        while index < end {
            let byte = bytes[index]
            if atFieldStart && byte == quote {
                atFieldStart = false
                index += 1
                var strayQuoteOpen = false
                while index < end {
                    let inner = bytes[index]
                    if inner == quote {
                        if index + 1 < end && bytes[index + 1] == quote {
                            field.append(quote)
                            index += 2
                            if strayQuoteOpen && isFieldEnd(index) { break }
                        } else if isFieldEnd(index + 1) {
                            index += 1
                            while index < end, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") {
                                index += 1
                            }
                            break
                        } else {
                            field.append(quote)
                            strayQuoteOpen.toggle()
                            index += 1
                        }
                    } else if inner == carriageReturn {
                        field.append(lineFeed)
                        line += 1
                        index += (index + 1 < end && bytes[index + 1] == lineFeed) ? 2 : 1
                    } else {
                        if inner == lineFeed { line += 1 }
                        field.append(inner)
                        index += 1
                    }
                }
                continue
            }
            atFieldStart = false
            if byte == separator {
                finishField()
                atFieldStart = true
                index += 1
            } else if byte == lineFeed || byte == carriageReturn {
                finishRecord()
                index += (byte == carriageReturn && index + 1 < end && bytes[index + 1] == lineFeed) ? 2 : 1
                line += 1
                recordLine = line
                atFieldStart = true
            } else {
                field.append(byte)
                index += 1
            }
        }
        if !atFieldStart || !fields.isEmpty || !field.isEmpty { finishRecord() }
        return records
    }
}

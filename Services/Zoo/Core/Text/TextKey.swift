import Foundation

/// Normalised forms of human text used for matching: case- and diacritics-insensitive, trimmed,
/// with runs of white space collapsed to one space ("  Želva  obrovská " → "zelva obrovska").
public enum TextKey {
    /// The folded form of `text`.
    public static func fold(_ text: String) -> String {
        if let ascii = foldASCII(text) { return ascii }
        let folded = text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
        return collapseWhitespace(folded)
    }

    /// `fold` for ASCII text without Foundation (search queries are mostly ASCII); nil for other text.
    private static func foldASCII(_ text: String) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var pendingSpace = false
        for byte in text.utf8 {
            guard byte < 0x80 else { return nil }
            if byte == 0x20 || (0x09...0x0D).contains(byte) {
                pendingSpace = !bytes.isEmpty
                continue
            }
            if pendingSpace { bytes.append(0x20) }
            pendingSpace = false
            bytes.append((0x41...0x5A).contains(byte) ? byte + 0x20 : byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `text` trimmed, with inner runs of white space (including no-break spaces) collapsed to one space.
    public static func collapseWhitespace(_ text: String) -> String {
        text.split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
    }

    /// The folded form of a Czech animal name used to join sources (lexicon, adoptions, map features):
    /// parenthesised remarks such as "(= čtyřprstá)" are dropped before folding.
    public static func nameKey(_ name: String) -> String {
        var result = ""
        var depth = 0
        for character in name {
            if character == "(" {
                depth += 1
            } else if character == ")" {
                depth = max(0, depth - 1)
            } else if depth == 0 {
                result.append(character)
            }
        }
        return fold(result)
    }

    /// The value of a source cell: trimmed, `nil` when empty or the literal `''` placeholder.
    public static func cleanValue(_ raw: String?) -> String? {
        guard let raw else { return nil }
        let trimmed = collapseWhitespace(raw)
        return trimmed.isEmpty || trimmed == "''" ? nil : trimmed
    }

    /// Splits a comma-separated multi-value cell ("Afrika, Asie") into clean values.
    public static func splitList(_ raw: String?) -> [String] {
        guard let value = cleanValue(raw) else { return [] }
        return value.split(separator: ",").compactMap { cleanValue(String($0)) }
    }
}

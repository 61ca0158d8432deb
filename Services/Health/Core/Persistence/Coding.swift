import Base
import Foundation

extension UUID {
    /// The 16 bytes, as the database stores them.
    var bytes: [UInt8] { withUnsafeBytes(of: uuid) { Array($0) } }

    init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self = bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
    }

    /// A name-based UUID (version 8, RFC 9562 §5.8) from the SHA-256 of `name`: the same name gives the same
    /// UUID on every machine, which is what makes importing the same export twice add nothing.
    public static func named(_ name: some Sequence<UInt8>) -> UUID {
        var bytes = Array(SHA256.hash(name).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(bytes: bytes)!
    }
}

/// Metadata as stored: a JSON array of `[key, value]` pairs, written by hand (a million imported records
/// would spend seconds in JSONEncoder) and read back with JSONSerialization. NULL for none.
enum MetadataCoding {
    static func encode(_ entries: [MetadataEntry]) -> String? {
        guard !entries.isEmpty else { return nil }
        var text = "["
        for (index, entry) in entries.enumerated() {
            if index > 0 { text += "," }
            text += "["
            appendQuoted(entry.key, to: &text)
            text += ","
            appendQuoted(entry.value, to: &text)
            text += "]"
        }
        return text + "]"
    }

    static func decode(_ text: String?) -> [MetadataEntry] {
        guard let text, let data = text.data(using: .utf8),
            let pairs = try? JSONSerialization.jsonObject(with: data) as? [[String]]
        else { return [] }
        return pairs.compactMap { $0.count == 2 ? MetadataEntry($0[0], $0[1]) : nil }
    }

    private static func appendQuoted(_ string: String, to text: inout String) {
        text += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case let control where control.value < 0x20:
                text += String(format: "\\u%04x", control.value)
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}

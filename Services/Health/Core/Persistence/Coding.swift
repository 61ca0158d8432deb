import Base
import Foundation
import TLS

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

/// Metadata as stored: a JSON array of `[key, value]` pairs, NULL for none. Written and read by hand: a million
/// imported records spent a fifth of the import in a `String`-appending encoder (and would spend seconds in
/// JSONEncoder), and every pulled or compared sample went through JSONSerialization. Text this reader does not
/// expect (written by hand into the database, say) still goes to JSONSerialization.
enum MetadataCoding {
    static func encode(_ entries: [MetadataEntry]) -> String? {
        guard !entries.isEmpty else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entries.reduce(2) { $0 + $1.key.utf8.count + $1.value.utf8.count + 8 })
        bytes.append(UInt8(ascii: "["))
        for (index, entry) in entries.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "["))
            appendQuoted(entry.key, to: &bytes)
            bytes.append(UInt8(ascii: ","))
            appendQuoted(entry.value, to: &bytes)
            bytes.append(UInt8(ascii: "]"))
        }
        bytes.append(UInt8(ascii: "]"))
        return String(decoding: bytes, as: UTF8.self)
    }

    static func decode(_ text: String?) -> [MetadataEntry] {
        guard var text else { return [] }
        if let entries = text.withUTF8({ bytes in
            var reader = Reader(bytes: bytes)
            return reader.entries()
        }) {
            return entries
        }
        guard let data = text.data(using: .utf8),
            let pairs = try? JSONSerialization.jsonObject(with: data) as? [[String]]
        else {
            return []
        }
        return pairs.compactMap { $0.count == 2 ? MetadataEntry($0[0], $0[1]) : nil }
    }

    /// JSON's string escapes: the quote, the backslash and control characters; other bytes (UTF-8 included)
    /// as they are.
    private static func appendQuoted(_ string: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case UInt8(ascii: "\n"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case UInt8(ascii: "\r"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case UInt8(ascii: "\t"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes += [
                    UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)],
                    hex[Int(byte & 15)],
                ]
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Reads `[["key","value"],…]` as `encode` writes it (any JSON string escape is understood; whitespace
    /// between tokens is not expected). Nil for anything else, which goes to JSONSerialization instead.
    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func entries() -> [MetadataEntry]? {
            guard take(UInt8(ascii: "[")) else { return nil }
            var entries: [MetadataEntry] = []
            if take(UInt8(ascii: "]")) { return index == bytes.count ? entries : nil }
            repeat {
                guard take(UInt8(ascii: "[")), let key = string(), take(UInt8(ascii: ",")), let value = string(),
                    take(UInt8(ascii: "]"))
                else { return nil }
                entries.append(MetadataEntry(key, value))
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "]")) && index == bytes.count ? entries : nil
        }

        private mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        private mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            // The common case: no escape, one copy.
            while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\") {
                index += 1
            }
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "\"") {
                index += 1
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index - 1]), as: UTF8.self)
            }
            var out = Array(bytes[start..<index])
            var pendingHigh: UInt32?
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                if byte == UInt8(ascii: "\"") {
                    guard pendingHigh == nil else { return nil }
                    return String(decoding: out, as: UTF8.self)
                }
                guard byte == UInt8(ascii: "\\") else {
                    guard pendingHigh == nil else { return nil }
                    out.append(byte)
                    continue
                }
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                if escape != UInt8(ascii: "u"), pendingHigh != nil { return nil }
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "n"): out.append(10)
                case UInt8(ascii: "r"): out.append(13)
                case UInt8(ascii: "t"): out.append(9)
                case UInt8(ascii: "b"): out.append(8)
                case UInt8(ascii: "f"): out.append(12)
                case UInt8(ascii: "u"):
                    guard index + 4 <= bytes.count,
                        let code = UInt32(
                            String(decoding: UnsafeBufferPointer(rebasing: bytes[index..<index + 4]), as: UTF8.self),
                            radix: 16)
                    else { return nil }
                    index += 4
                    var scalarValue = code
                    if let high = pendingHigh {
                        guard (0xDC00...0xDFFF).contains(code) else { return nil }
                        scalarValue = 0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)
                        pendingHigh = nil
                    } else if (0xD800...0xDBFF).contains(code) {
                        pendingHigh = code
                        continue
                    }
                    guard let scalar = Unicode.Scalar(scalarValue) else { return nil }
                    out += Array(String(Character(scalar)).utf8)
                default: return nil
                }
            }
            return nil
        }
    }
}

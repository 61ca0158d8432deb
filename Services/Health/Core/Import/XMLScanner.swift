import Foundation

/// A malformed XML document: what is wrong and the line (1-based) where it was found.
public struct XMLFormatError: Error, Sendable, Equatable, CustomStringConvertible {
    public var line: Int
    public var reason: String
    public var description: String { "line \(line): \(reason)" }
}

/// What the scanner reports, in document order.
protocol XMLScannerDelegate {
    /// A start tag (`selfClosing` for `<a/>`, which gets no `endElement`). Attribute values are decoded.
    mutating func startElement(_ name: String, attributes: [(String, String)], selfClosing: Bool, line: Int) throws
    mutating func endElement(_ name: String, line: Int) throws
}

/// A streaming, non-validating XML scanner for Apple Health exports (files of several GB): reads the file
/// in 1 MiB chunks and reports elements and attributes, checking that tags nest and are well formed.
///
/// It skips the XML declaration, processing instructions, comments, CDATA, character data, and the
/// `DOCTYPE` whole, internal subset included (exports carry one with `ATTLIST`s and comments, the reason
/// strict parsers failed on them for years). Entities: the five predefined ones and character references;
/// anything else is a format error. Input is UTF-8.
struct XMLScanner {
    /// Up to the given count of the next bytes; empty at the end (a file, or a zip entry inflated as it is read).
    private let read: (Int) throws -> Data
    private var buffer: [UInt8] = []
    private var position = 0
    private var atEnd = false
    private var line = 1
    private var stack: [String] = []
    private var sawRoot = false
    /// Bytes consumed so far, for progress.
    private(set) var bytesRead: Int64 = 0
    private let chunkSize: Int
    /// Called with `bytesRead` after each chunk read.
    private let onChunk: ((Int64) -> Void)?

    init(file: FileHandle, chunkSize: Int = 1 << 20, onChunk: ((Int64) -> Void)? = nil) {
        self.init(read: { try file.read(upToCount: $0) ?? Data() }, chunkSize: chunkSize, onChunk: onChunk)
    }

    init(read: @escaping (Int) throws -> Data, chunkSize: Int = 1 << 20, onChunk: ((Int64) -> Void)? = nil) {
        self.read = read
        self.chunkSize = chunkSize
        self.onChunk = onChunk
    }

    private func fail(_ reason: String, line: Int? = nil) -> XMLFormatError {
        XMLFormatError(line: line ?? self.line, reason: reason)
    }

    /// Reads more of the file; false at its end. Drops what was consumed.
    private mutating func refill() throws -> Bool {
        guard !atEnd else { return false }
        if position > 0 {
            buffer.removeFirst(position)
            position = 0
        }
        let data = try read(chunkSize)
        if data.isEmpty {
            atEnd = true
            return false
        }
        bytesRead += Int64(data.count)
        buffer.append(contentsOf: data)
        onChunk?(bytesRead)
        return true
    }

    /// The offset from `position` where `terminator` starts, reading more as needed; nil at the end of input.
    private mutating func find(_ terminator: [UInt8], from offset: Int) throws -> Int? {
        var start = offset
        while true {
            if let found = Self.search(buffer, terminator, from: position + start) { return found - position }
            start = max(offset, buffer.count - position - terminator.count + 1)
            guard try refill() else { return nil }
        }
    }

    private static func search(_ haystack: [UInt8], _ needle: [UInt8], from: Int) -> Int? {
        guard needle.count > 0, haystack.count >= needle.count else { return nil }
        let first = needle[0]
        var index = from
        let last = haystack.count - needle.count
        while index <= last {
            if haystack[index] == first {
                var matched = true
                for offset in 1..<needle.count where haystack[index + offset] != needle[offset] {
                    matched = false
                    break
                }
                if matched { return index }
            }
            index += 1
        }
        return nil
    }

    /// Makes at least `count` bytes available after `position`; false if the input ends first.
    private mutating func ensure(_ count: Int) throws -> Bool {
        while buffer.count - position < count {
            guard try refill() else { return false }
        }
        return true
    }

    private mutating func consume(_ count: Int) {
        for index in position..<position + count where buffer[index] == 10 { line += 1 }
        position += count
    }

    /// Scans the whole document, reporting to `delegate`.
    mutating func scan<Delegate: XMLScannerDelegate>(_ delegate: inout Delegate) throws {
        while true {
            // Character data up to the next '<'.
            while true {
                while position < buffer.count, buffer[position] != 60 {
                    let byte = buffer[position]
                    if byte == 10 {
                        line += 1
                    } else if stack.isEmpty, byte != 32, byte != 9, byte != 13,
                        !(!sawRoot && (byte == 0xEF || byte == 0xBB || byte == 0xBF))
                    {
                        throw fail("text outside the root element")
                    }
                    position += 1
                }
                if position < buffer.count { break }
                guard try refill() else {
                    if let open = stack.last { throw fail("the file ends inside <\(open)> (truncated?)") }
                    if !sawRoot { throw fail("no root element") }
                    return
                }
            }
            guard try ensure(2) else { throw fail("the file ends inside a tag") }
            let next = buffer[position + 1]
            if next == 63 {  // <?
                guard let end = try find([63, 62], from: 2) else { throw fail("unterminated processing instruction") }
                consume(end + 2)
            } else if next == 33 {  // <!
                try scanDeclaration()
            } else if next == 47 {  // </
                let startLine = line
                guard let end = try find([62], from: 2) else { throw fail("unterminated end tag") }
                var (from, to) = (position + 2, position + end)
                while from < to, Self.isSpace(buffer[from]) { from += 1 }
                while to > from, Self.isSpace(buffer[to - 1]) { to -= 1 }
                let name = String(decoding: buffer[from..<to], as: UTF8.self)
                guard let open = stack.popLast() else { throw fail("</\(name)> closes nothing", line: startLine) }
                guard open == name else { throw fail("</\(name)> closes <\(open)>", line: startLine) }
                consume(end + 1)
                try delegate.endElement(name, line: startLine)
            } else {
                try scanStartTag(&delegate)
            }
        }
    }

    /// `<!-- … -->`, `<![CDATA[ … ]]>` or `<!DOCTYPE … [ internal subset ] >`.
    private mutating func scanDeclaration() throws {
        guard try ensure(4) else { throw fail("the file ends inside a declaration") }
        if buffer[position + 2] == 45, buffer[position + 3] == 45 {  // <!--
            guard let end = try find(Array("-->".utf8), from: 4) else { throw fail("unterminated comment") }
            consume(end + 3)
            return
        }
        if try ensure(9), Array(buffer[position..<position + 9]) == Array("<![CDATA[".utf8) {
            guard !stack.isEmpty else { throw fail("CDATA outside the root element") }
            guard let end = try find(Array("]]>".utf8), from: 9) else { throw fail("unterminated CDATA section") }
            consume(end + 3)
            return
        }
        guard !sawRoot, try ensure(9), Array(buffer[position..<position + 9]) == Array("<!DOCTYPE".utf8) else {
            throw fail("unexpected markup declaration")
        }
        // The DOCTYPE: skip quoted strings, comments and the bracketed internal subset, up to the closing '>'.
        let startLine = line
        var offset = 9
        var inSubset = false
        while true {
            guard try ensure(offset + 4) || (try ensure(offset + 1)) else {
                throw fail("unterminated DOCTYPE", line: startLine)
            }
            let byte = buffer[position + offset]
            if byte == 34 || byte == 39 {  // quoted literal
                guard let close = try find([byte], from: offset + 1) else {
                    throw fail("unterminated literal in DOCTYPE", line: startLine)
                }
                offset = close + 1
            } else if byte == 60, buffer.count - position > offset + 3, buffer[position + offset + 1] == 33,
                buffer[position + offset + 2] == 45, buffer[position + offset + 3] == 45
            {
                guard let close = try find(Array("-->".utf8), from: offset + 4) else {
                    throw fail("unterminated comment in DOCTYPE", line: startLine)
                }
                offset = close + 3
            } else if byte == 91 {  // [
                inSubset = true
                offset += 1
            } else if byte == 93 {  // ]
                inSubset = false
                offset += 1
            } else if byte == 62, !inSubset {  // >
                consume(offset + 1)
                return
            } else {
                offset += 1
            }
        }
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        byte == 95 || byte == 58 || byte == 45 || byte == 46 || (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90)
            || (byte >= 97 && byte <= 122) || byte >= 0x80
    }

    private static func isSpace(_ byte: UInt8) -> Bool { byte == 32 || byte == 10 || byte == 9 || byte == 13 }

    private mutating func scanStartTag<Delegate: XMLScannerDelegate>(_ delegate: inout Delegate) throws {
        let startLine = line
        // The whole tag: up to a '>' outside quotes.
        var end = 1
        var quote: UInt8 = 0
        while true {
            if position + end >= buffer.count {
                guard try refill() else { throw fail("the file ends inside a start tag", line: startLine) }
                continue
            }
            let byte = buffer[position + end]
            if quote != 0 {
                if byte == quote {
                    quote = 0
                } else if byte == 60 {
                    throw fail("'<' inside an attribute value", line: line(at: end, from: startLine))
                }
            } else if byte == 34 || byte == 39 {
                quote = byte
            } else if byte == 62 {
                break
            } else if byte == 60 {
                throw fail("'<' inside a tag", line: line(at: end, from: startLine))
            }
            end += 1
        }
        let tag = buffer[position + 1..<position + end]
        var index = tag.startIndex
        while index < tag.endIndex, Self.isNameByte(tag[index]) { index += 1 }
        guard index > tag.startIndex else { throw fail("a tag without a name", line: startLine) }
        let name = String(decoding: tag[tag.startIndex..<index], as: UTF8.self)
        var attributes: [(String, String)] = []
        var selfClosing = false
        while true {
            let before = index
            while index < tag.endIndex, Self.isSpace(tag[index]) { index += 1 }
            guard index < tag.endIndex else { break }
            if tag[index] == 47 {  // '/'
                guard index + 1 == tag.endIndex else { throw fail("'/' inside <\(name)>", line: startLine) }
                selfClosing = true
                break
            }
            guard index > before else {
                throw fail("attributes of <\(name)> must be separated by spaces", line: startLine)
            }
            let nameStart = index
            while index < tag.endIndex, Self.isNameByte(tag[index]) { index += 1 }
            guard index > nameStart else { throw fail("a malformed attribute in <\(name)>", line: startLine) }
            let attribute = String(decoding: tag[nameStart..<index], as: UTF8.self)
            while index < tag.endIndex, Self.isSpace(tag[index]) { index += 1 }
            guard index < tag.endIndex, tag[index] == 61 else {
                throw fail("attribute \(attribute) of <\(name)> has no value", line: startLine)
            }
            index += 1
            while index < tag.endIndex, Self.isSpace(tag[index]) { index += 1 }
            guard index < tag.endIndex, tag[index] == 34 || tag[index] == 39 else {
                throw fail("the value of \(attribute) in <\(name)> is not quoted", line: startLine)
            }
            let quoteByte = tag[index]
            index += 1
            let valueStart = index
            while index < tag.endIndex, tag[index] != quoteByte { index += 1 }
            guard index < tag.endIndex else { throw fail("unterminated value of \(attribute)", line: startLine) }
            let value = try decode(tag[valueStart..<index], line: startLine)
            index += 1
            if attributes.contains(where: { $0.0 == attribute }) {
                throw fail("attribute \(attribute) repeated in <\(name)>", line: startLine)
            }
            attributes.append((attribute, value))
        }
        if stack.isEmpty {
            guard !sawRoot else { throw fail("a second root element <\(name)>", line: startLine) }
            sawRoot = true
        }
        consume(end + 1)
        if !selfClosing { stack.append(name) }
        try delegate.startElement(name, attributes: attributes, selfClosing: selfClosing, line: startLine)
    }

    private func line(at offset: Int, from startLine: Int) -> Int {
        startLine + buffer[position..<position + offset].reduce(0) { $0 + ($1 == 10 ? 1 : 0) }
    }

    /// An attribute value with entity and character references replaced.
    private func decode(_ raw: ArraySlice<UInt8>, line: Int) throws -> String {
        guard raw.contains(38) else { return String(decoding: raw, as: UTF8.self) }
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var index = raw.startIndex
        while index < raw.endIndex {
            let byte = raw[index]
            guard byte == 38 else {
                out.append(byte)
                index += 1
                continue
            }
            guard let semicolon = raw[index...].firstIndex(of: 59), semicolon - index <= 10 else {
                throw fail("an unterminated '&' reference", line: line)
            }
            let entity = String(decoding: raw[index + 1..<semicolon], as: UTF8.self)
            switch entity {
            case "lt": out.append(60)
            case "gt": out.append(62)
            case "amp": out.append(38)
            case "quot": out.append(34)
            case "apos": out.append(39)
            default:
                var scalarValue: UInt32?
                if entity.hasPrefix("#x") {
                    scalarValue = UInt32(entity.dropFirst(2), radix: 16)
                } else if entity.hasPrefix("#") {
                    scalarValue = UInt32(entity.dropFirst(1))
                }
                guard let scalarValue, let scalar = Unicode.Scalar(scalarValue) else {
                    throw fail("unknown entity &\(entity);", line: line)
                }
                out.append(contentsOf: Array(String(Character(scalar)).utf8))
            }
            index = semicolon + 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}

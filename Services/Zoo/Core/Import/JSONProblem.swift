import Foundation

/// Why a JSON source file could not be decoded, in words a person who edits or publishes the file can act on:
/// which entry and field, what was expected and what was there. `DecodingError`'s own description
/// ("DecodingError.keyNotFound: … Debug description: No value associated with key CodingKeys(…)") names
/// Swift's types and coding keys, not the file; an import's error is shown to the person who ran it.
enum JSONProblem {
    /// Words for `error`, thrown decoding `data`. An error that is no `DecodingError` keeps its own description.
    static func describe(_ error: any Error, in data: Data) -> String {
        guard let error = error as? DecodingError else { return String(describing: error) }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(place(context.codingPath + [key])) is missing"
        case .valueNotFound(let type, let context):
            return "\(place(context.codingPath)) is null, where \(kind(type)) belongs"
        case .typeMismatch(let type, let context):
            return "\(place(context.codingPath)) should be \(kind(type))" + found(context.debugDescription)
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return syntaxProblem(data)
                ?? "a value does not fit its field (a fraction or too large a number where a whole number belongs?)"
        case .dataCorrupted(let context):
            return "\(place(context.codingPath)) cannot be read: \(context.debugDescription)"
        @unknown default:
            return String(describing: error)
        }
    }

    /// `entry 3: field map_locations[0].geometry` for a path into a top-level list (entries counted from 1, as
    /// skipped rows are), `field roads[2]._id` otherwise, `the file` for the top level itself.
    private static func place(_ path: [any CodingKey]) -> String {
        guard !path.isEmpty else { return "the file" }
        var keys = path[...]
        var entry = ""
        if let index = keys.first?.intValue {
            entry = "entry \(index + 1)"
            keys = keys.dropFirst()
            if keys.isEmpty { return entry }
        }
        var field = ""
        for key in keys {
            if let index = key.intValue {
                field += "[\(index)]"
            } else {
                field += (field.isEmpty ? "" : ".") + key.stringValue
            }
        }
        return (entry.isEmpty ? "" : entry + ": ") + "field \(field)"
    }

    private static func kind(_ type: Any.Type) -> String {
        switch String(describing: type) {
        case "Int", "Int64", "Int32", "UInt", "UInt64": "a whole number"
        case "Double", "Float": "a number"
        case "String": "a string"
        case "Bool": "true or false"
        case let name where name.hasPrefix("Array"): "a list"
        case let name where name.hasPrefix("Dictionary"): "an object"
        default: "a \(type)"
        }
    }

    /// ", but it is a string" from Foundation's "Expected to decode Int but found a string instead."
    private static func found(_ debugDescription: String) -> String {
        guard let start = debugDescription.range(of: "but found "),
            let end = debugDescription.range(of: " instead", range: start.upperBound..<debugDescription.endIndex)
        else { return "" }
        let what = debugDescription[start.upperBound..<end.lowerBound].replacingOccurrences(
            of: "a dictionary", with: "an object"
        )
        .replacingOccurrences(of: "an array", with: "a list")
        return ", but it is \(what)"
    }

    /// Where the text stops being JSON, from JSONSerialization ("Invalid value around character 10."), as a line
    /// and column; nil when it parses (the problem is then a value, not the syntax).
    private static func syntaxProblem(_ data: Data) -> String? {
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            return nil
        } catch {
            let detail = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String) ?? ""
            if detail.contains("end of file") {
                return "not valid JSON: the text ends before the JSON does (is the file cut short?)"
            }
            guard let range = detail.range(of: "around character "),
                let offset = Int(detail[range.upperBound...].prefix(while: \.isNumber)), offset <= data.count
            else { return "not valid JSON" + (detail.isEmpty ? "" : ": \(detail)") }
            let before = data.prefix(offset)
            let line = before.count(where: { $0 == UInt8(ascii: "\n") }) + 1
            let column = offset - (before.lastIndex(of: UInt8(ascii: "\n")).map { $0 - data.startIndex + 1 } ?? 0) + 1
            return "not valid JSON: unexpected text at line \(line), column \(column)"
        }
    }
}

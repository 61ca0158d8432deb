import Base
import ClassificationCore
import Schema

/// Reads a catalogue file as the app wrote it, keeping its attributes' order (an object's members are read in
/// order, which Foundation's decoders do not keep). Two shapes, per entry:
///
/// - the service's own: `{label, name, local_name | localName, attributes}` — both spellings protobuf's JSON mapping
///   reads (the proto name and lowerCamelCase, which `--json` prints), `attributes` an object `{key: value}` or the
///   printed array `[{key, value}]`; a file holding `{"entries": [...]}` (what `catalogue search --json` prints) too;
/// - the dog seed's breed file: `{id, breed, breedCZ, fur, size, …}` — `breed` the label and name, `breedCZ` the
///   local name, every other member an attribute in the file's order (numbers as written, nulls left out).
///
/// A key neither shape knows is INVALID_ARGUMENT listing them, never dropped.
enum CatalogueImport {
    static func parse(_ bytes: [UInt8]) throws -> [CatalogueEntry] {
        let json: JSONValue
        do {
            json = try JSONParser.parse(bytes)
        } catch {
            throw ClassificationError.invalid("catalogue: \(error)")
        }
        var elements: [JSONValue]
        if let array = json.arrayValue {
            elements = array
        } else if let members = json.objectValue, members.map(\.key) == ["entries"],
            let array = members[0].value.arrayValue
        {
            elements = array
        } else {
            throw ClassificationError.invalid("catalogue: expected a JSON array of entries (or {\"entries\": [...]})")
        }
        return try elements.enumerated().map { index, element in
            guard let members = element.objectValue else {
                throw ClassificationError.invalid("catalogue[\(index)]: not an object")
            }
            return members.contains(where: { $0.key == "breed" })
                ? try seedEntry(members, index) : try serviceEntry(members, index)
        }
    }

    static let serviceKeys = ["label", "name", "local_name", "localName", "attributes"]

    static func serviceEntry(_ members: [JSONMember], _ index: Int) throws -> CatalogueEntry {
        let unknown = members.map(\.key).filter { !serviceKeys.contains($0) }
        guard unknown.isEmpty else {
            throw ClassificationError.invalid(
                "catalogue[\(index)]: unknown key\(unknown.count == 1 ? "" : "s") \(unknown.joined(separator: ", ")) "
                    + "(an entry has label, name, local_name or localName, attributes; or the dog seed's breed, breedCZ and attributes)"
            )
        }
        func string(_ key: String) throws -> String? {
            guard let value = members.first(where: { $0.key == key })?.value, value != .null else { return nil }
            guard let text = value.stringValue else {
                throw ClassificationError.invalid("catalogue[\(index)].\(key): not a string")
            }
            return text
        }
        guard let label = try string("label") else {
            throw ClassificationError.invalid("catalogue[\(index)].label: missing")
        }
        let spellings = try [string("local_name"), string("localName")].compactMap { $0 }
        guard spellings.count < 2 else {
            throw ClassificationError.invalid("catalogue[\(index)]: local_name and localName both given; give one")
        }
        let name = try string("name") ?? label
        var attributes: [CatalogueEntry.Attribute] = []
        switch members.first(where: { $0.key == "attributes" })?.value {
        case nil, .null?: break
        case .object(let pairs)?:
            attributes = try pairs.compactMap { pair in
                try text(pair.value, "catalogue[\(index)].attributes.\(pair.key)").map { .init(pair.key, $0) }
            }
        case .array(let rows)?:
            attributes = try rows.enumerated().map { i, row in
                let at = "catalogue[\(index)].attributes[\(i)]"
                guard let fields = row.objectValue, Set(fields.map(\.key)).isSubset(of: ["key", "value"]),
                    let key = row["key"]?.stringValue
                else {
                    throw ClassificationError.invalid("\(at): expected {key, value}")
                }
                return .init(key, try row["value"].flatMap { try text($0, at + ".value") } ?? "")
            }
        default:
            throw ClassificationError.invalid(
                "catalogue[\(index)].attributes: expected an object {key: value} or an array [{key, value}]")
        }
        return CatalogueEntry(label: label, name: name, localName: spellings.first ?? name, attributes: attributes)
    }

    static func seedEntry(_ members: [JSONMember], _ index: Int) throws -> CatalogueEntry {
        if let clash = members.first(where: {
            ["label", "name", "local_name", "localName", "attributes"].contains($0.key)
        }) {
            throw ClassificationError.invalid(
                "catalogue[\(index)]: \(clash.key) beside breed; an entry is either the service's shape (label, …) or the dog seed's (breed, breedCZ, …)"
            )
        }
        var label = "", localName: String?
        var attributes: [CatalogueEntry.Attribute] = []
        for member in members {
            let at = "catalogue[\(index)].\(member.key)"
            switch member.key {
            case "breed":
                guard let text = member.value.stringValue else {
                    throw ClassificationError.invalid("\(at): not a string")
                }
                label = text
            case "breedCZ":
                guard let text = member.value.stringValue else {
                    throw ClassificationError.invalid("\(at): not a string")
                }
                localName = text
            default:
                if let value = try text(member.value, at) { attributes.append(.init(member.key, value)) }
            }
        }
        return CatalogueEntry(label: label, name: label, localName: localName ?? label, attributes: attributes)
    }

    /// An attribute's value as text: a string as it is, a number as written, a boolean as true/false; null nil
    /// (left out); an array or object INVALID_ARGUMENT.
    static func text(_ value: JSONValue, _ at: String) throws -> String? {
        switch value {
        case .string(let text): text
        case .number(let number): number.text
        case .bool(let flag): flag ? "true" : "false"
        case .null: nil
        case .array, .object:
            throw ClassificationError.invalid("\(at): a list or object is no attribute value; give text")
        }
    }
}

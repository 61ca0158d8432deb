/// How proto names become Swift and C names.
enum Naming {
    /// Words that stay upper-case inside camel-cased names, as in SwiftProtobuf: `call_id` → `callID`.
    private static let upperCaseWords: Set<String> = ["id", "url", "http", "https"]

    /// `call_id` → `callID`, `timeout_micros` → `timeoutMicros`, `SERVICE_UNKNOWN` → `serviceUnknown`.
    static func lowerCamelCase(_ name: String) -> String {
        let words = name.split(separator: "_").map(String.init)
        guard let first = words.first else { return name }
        let head = first == first.uppercased() ? first.lowercased() : lowercasingFirst(first)
        return head + words.dropFirst().map(capitalized).joined()
    }

    /// `menagerie.zoo.v1` → `ZooV1`: the package's components after the first (the organisation), capitalised.
    static func namespace(ofPackage package: String) -> String {
        let components = package.split(separator: ".").map(String.init)
        return components.dropFirst(components.count > 1 ? 1 : 0).map { upperCamelCase($0) }.joined()
    }

    /// `zoo` → `Zoo`, `search_animals` → `SearchAnimals`.
    static func upperCamelCase(_ name: String) -> String {
        name.split(separator: "_").map { capitalized(String($0)) }.joined()
    }

    /// `FrameKind` → `FRAME_KIND`, `HTTPStatus` → `HTTP_STATUS`: the prefix proto style puts on enum values.
    static func screamingSnakeCase(_ name: String) -> String {
        let characters = Array(name)
        var result = ""
        for (index, character) in characters.enumerated() {
            if index > 0, character.isUppercase {
                let previous = characters[index - 1]
                let next = index + 1 < characters.count ? characters[index + 1] : nil
                if previous.isLowercase || previous.isNumber || (previous.isUppercase && next?.isLowercase == true) {
                    result.append("_")
                }
            }
            result += character.uppercased()
        }
        return result
    }

    /// `FRAME_KIND_REQUEST` in enum `FrameKind` → `request`; the prefix stays when dropping it would
    /// leave nothing or a name starting with a digit.
    static func enumCaseName(_ valueName: String, enumName: String) -> String {
        let prefix = screamingSnakeCase(enumName) + "_"
        var stripped = valueName
        if valueName.hasPrefix(prefix) {
            let rest = String(valueName.dropFirst(prefix.count))
            if let first = rest.first, !first.isNumber { stripped = rest }
        }
        return lowerCamelCase(stripped)
    }

    /// The name with backticks when it is a Swift keyword.
    static func escaped(_ identifier: String) -> String {
        swiftKeywords.contains(identifier) ? "`\(identifier)`" : identifier
    }

    /// protoc-c's C identifier of a message's descriptor: `menagerie.rpc.v1.Frame` → `menagerie__rpc__v1__frame__descriptor`.
    static func protobufCDescriptor(ofMessage fullName: String) -> String {
        fullName.split(separator: ".").map { protobufCLower(String($0)) }.joined(separator: "__") + "__descriptor"
    }

    /// protoc-c's `CamelToLower`: an underscore before each upper-case letter that follows a non-upper-case one.
    private static func protobufCLower(_ name: String) -> String {
        var result = ""
        var previousWasUpper = true
        for character in name {
            let isUpper = character.isASCII && character.isUppercase
            if isUpper && !previousWasUpper { result.append("_") }
            result += isUpper ? character.lowercased() : String(character)
            previousWasUpper = isUpper
        }
        return result
    }

    private static func capitalized(_ word: String) -> String {
        if upperCaseWords.contains(word.lowercased()) { return word.uppercased() }
        let lowered = word == word.uppercased() ? word.lowercased() : word
        return lowered.prefix(1).uppercased() + lowered.dropFirst()
    }

    /// `Check` → `check`, `HTTPGet` → `httpGet`: lower-cases the leading capitals, except one that starts a word.
    private static func lowercasingFirst(_ word: String) -> String {
        let characters = Array(word)
        var end = 0
        while end < characters.count, characters[end].isUppercase { end += 1 }
        if end > 1, end < characters.count, characters[end].isLowercase { end -= 1 }
        return String(characters[..<max(end, 1)]).lowercased() + String(characters[max(end, 1)...])
    }

    private static let swiftKeywords: Set<String> = [
        "associatedtype", "class", "deinit", "enum", "extension", "fileprivate", "func", "import", "init",
        "inout", "internal", "let", "open", "operator", "private", "precedencegroup", "protocol", "public",
        "rethrows", "static", "struct", "subscript", "typealias", "var", "break", "case", "catch", "continue",
        "default", "defer", "do", "else", "fallthrough", "for", "guard", "if", "in", "repeat", "return", "throw",
        "switch", "where", "while", "Any", "as", "await", "false", "is", "nil", "self", "Self", "super", "throws",
        "true", "try", "Type", "Protocol",
    ]
}

/// Writes protobuf's JSON mapping for one `.proto` file's messages and enums (runtime: `ProtoJSON.swift` in
/// Schema): per message its field table and a `ProtoJSONMessage` conformance that encodes and decodes field
/// by field; per enum its name table; per file the list of its message types. Appended to the file's
/// `.pb.swift` by `SwiftEmitter`, so a message and its mapping cannot be generated apart.
struct JSONEmitter {
    let file: ProtoFile
    let types: SwiftTypeTable

    func emit(into output: inout CodeWriter) throws {
        let namespace = Naming.namespace(ofPackage: file.package)
        for decl in file.enums { emitEnum(decl, scope: namespace, into: &output) }
        var messageTypes: [String] = []
        for message in file.messages { try emitMessage(message, scope: namespace, into: &output, listing: &messageTypes) }
        output.blank()
        output.open("extension \(namespace)")
        output.doc("Every message type of `\(file.name)`, nested ones included, in declaration order.")
        output.line("public static let \(Self.fileListName(for: file.name)) = ProtoFileMessages(")
        output.line("    path: \"\(file.name)\",")
        if messageTypes.isEmpty {
            output.line("    messages: [])")
        } else {
            output.line("    messages: [")
            for type in messageTypes { output.line("        \(type).self,") }
            output.line("    ])")
        }
        output.close()
    }

    /// `menagerie/jobs/v1/testing.proto` → `testingProtoFile`.
    static func fileListName(for protoPath: String) -> String {
        let base = protoPath.droppingProtoExtension.split(separator: "/").last.map(String.init) ?? protoPath
        return Naming.lowerCamelCase(base) + "ProtoFile"
    }

    private func emitEnum(_ decl: ProtoEnumDecl, scope: String, into output: inout CodeWriter) {
        output.blank()
        output.open("extension \(scope).\(Naming.escaped(decl.name)): ProtoJSONEnum")
        output.line("public static let protoJSONValues: [(name: String, number: Int32)] = [")
        for value in decl.values { output.line("    (\"\(value.name)\", \(value.number)),") }
        output.line("]")
        output.close()
    }

    /// How generated code reaches the field: the encoder's and decoder's method for its cardinality.
    private static func cardinality(_ field: ProtoFieldDecl) -> (method: String, name: String) {
        if field.label == .repeated { return ("repeated", ".repeated") }
        if field.kind == .message || field.isProto3Optional { return ("optional", ".optional") }
        return ("value", ".singular")
    }

    private func emitMessage(
        _ message: ProtoMessageDecl, scope: String, into output: inout CodeWriter, listing: inout [String]
    ) throws {
        let swiftName = "\(scope).\(Naming.escaped(message.name))"
        listing.append(swiftName)
        let fields = message.fields
        output.blank()
        output.open("extension \(swiftName): ProtoJSONMessage")
        if fields.isEmpty {
            output.line("public static let protoJSONFields: [ProtoJSONField] = []")
        } else {
            output.line("public static let protoJSONFields: [ProtoJSONField] = [")
            for field in fields {
                if field.kind == .group { throw GeneratorError.unsupported("\(message.fullName).\(field.name): groups (proto2)") }
                output.line(
                    "    ProtoJSONField(number: \(field.number), protoName: \"\(field.name)\", jsonName: \"\(field.jsonNameOrDefault)\", "
                        + "kind: .\(Naming.escaped(String(describing: field.kind))), cardinality: \(Self.cardinality(field).name)),")
            }
            output.line("]")
        }
        output.blank()
        output.open("public func jsonValue(options: ProtoJSONOptions) -> JSONValue")
        if fields.isEmpty {
            output.line("ProtoJSONObjectEncoder(Self.protoJSONFields, options: options).result")
        } else {
            output.line("var json = ProtoJSONObjectEncoder(Self.protoJSONFields, options: options)")
            for (index, field) in fields.enumerated() {
                output.line("json.\(Self.cardinality(field).method)(\(index), \(swiftFieldName(field)))")
            }
            output.line("return json.result")
        }
        output.close()
        output.blank()
        output.open("public init(jsonValue: JSONValue, options: ProtoJSONOptions) throws(ProtoJSONError)")
        output.line("self.init()")
        if fields.isEmpty {
            output.line("_ = try ProtoJSONObjectDecoder(jsonValue, Self.protoJSONFields, options: options)")
        } else {
            output.line("let json = try ProtoJSONObjectDecoder(jsonValue, Self.protoJSONFields, options: options)")
            for (index, field) in fields.enumerated() {
                output.line("try json.\(Self.cardinality(field).method)(\(index), into: &\(swiftFieldName(field)))")
            }
        }
        output.close()
        output.close()
        for decl in message.enums { emitEnum(decl, scope: swiftName, into: &output) }
        for nested in message.messages { try emitMessage(nested, scope: swiftName, into: &output, listing: &listing) }
    }

    private func swiftFieldName(_ field: ProtoFieldDecl) -> String {
        "self." + Naming.lowerCamelCase(field.name)
    }
}

/// The parts of `google/protobuf/descriptor.proto` the generator needs, decoded from a `FileDescriptorSet`.
/// Field numbers below are descriptor.proto's.

struct ProtoFile {
    var name = ""
    var package = ""
    var syntax = ""
    var messages: [ProtoMessageDecl] = []
    var enums: [ProtoEnumDecl] = []
    var services: [ProtoServiceDecl] = []
    /// Its top-level `extend` fields: only an options file (see `isOptionsFile`) has any.
    var extensions: [ProtoExtensionDecl] = []
    /// The files this one imports (`import "menagerie/jobs/v1/jobs.proto"`), as protoc names them.
    var dependencies: [String] = []
    /// Leading comment of the `syntax` statement: the file's description.
    var comment: String?

    /// A file of custom options (`menagerie/rpc/v1/options.proto`): its extensions are read from the other files'
    /// options; it generates no code and needs no line in modules.conf.
    var isOptionsFile: Bool { !extensions.isEmpty }

    /// protobuf's own descriptors, imported by an options file only: no code is generated for it.
    var isDescriptorProto: Bool { name == "google/protobuf/descriptor.proto" }
}

/// A top-level `extend` field.
struct ProtoExtensionDecl {
    var name = ""
    var number: Int32 = 0
    /// The message it extends, fully qualified with a leading dot (`.google.protobuf.MethodOptions`).
    var extendee = ""
}

/// The custom method options schema-gen carries into the method descriptors (options.proto's extensions of
/// `google.protobuf.MethodOptions`), by field number: read from each method's options, where protoc leaves them as
/// fields the generator's descriptor types do not declare. A new option is added here, in `ProtoMethodDecl` and in
/// the emitter; an options file declaring any other is refused.
enum MethodOptionNumber {
    static let access = 50101
    static let maxRequestBytes = 50102
    static let httpGet = 50103
    /// Names as options.proto declares them.
    static let known: [Int: String] = [access: "access", maxRequestBytes: "max_request_bytes", httpGet: "http_get"]
}

struct ProtoMessageDecl {
    var name = ""
    var fullName = ""
    var fields: [ProtoFieldDecl] = []
    var messages: [ProtoMessageDecl] = []
    var enums: [ProtoEnumDecl] = []
    var oneofCount = 0
    var isMapEntry = false
    var hasExtensions = false
    var comment: String?
}

struct ProtoFieldDecl {
    enum Label: UInt64 { case optional = 1, required = 2, repeated = 3 }

    /// `FieldDescriptorProto.Type`.
    enum Kind: UInt64 {
        case double = 1, float, int64, uint64, int32, fixed64, fixed32, bool, string, group, message, bytes,
            uint32, `enum`, sfixed32, sfixed64, sint32, sint64
    }

    var name = ""
    var number: Int32 = 0
    var label = Label.optional
    var kind = Kind.int32
    /// Fully qualified with a leading dot, for message and enum fields.
    var typeName = ""
    var oneofIndex: Int32?
    var isProto3Optional = false
    /// `json_name`: protoc fills it (lowerCamelCase of `name`, or the field's `json_name` option).
    /// Nil when the descriptor set lacks it; `jsonNameOrDefault` then derives it as protoc does.
    var jsonName: String?
    var comment: String?

    /// The name protobuf's JSON mapping uses: `json_name`, or protoc's rule applied to `name`
    /// (drop each `_` and capitalise the letter after it; nothing else changes).
    var jsonNameOrDefault: String {
        if let jsonName { return jsonName }
        var result = ""
        var capitalizeNext = false
        for character in name {
            if character == "_" {
                capitalizeNext = true
            } else {
                result += capitalizeNext ? character.uppercased() : String(character)
                capitalizeNext = false
            }
        }
        return result
    }
}

struct ProtoEnumDecl {
    struct Value {
        var name = ""
        var number: Int32 = 0
        var comment: String?
    }

    var name = ""
    var fullName = ""
    var values: [Value] = []
    var comment: String?
}

struct ProtoServiceDecl {
    var name = ""
    var fullName = ""
    var methods: [ProtoMethodDecl] = []
    var comment: String?
}

struct ProtoMethodDecl {
    var name = ""
    var inputType = ""
    var outputType = ""
    var clientStreaming = false
    var serverStreaming = false
    /// `MethodOptions.IdempotencyLevel`: 0 unknown, 1 no side effects, 2 idempotent.
    var idempotencyLevel: UInt64 = 0
    /// `(menagerie.rpc.v1.access)`: options.proto's `Access` (1 public, 2 user, 3 admin); nil when absent.
    var access: UInt64?
    /// `(menagerie.rpc.v1.max_request_bytes)`; nil when absent.
    var maxRequestBytes: UInt64?
    /// `(menagerie.rpc.v1.http_get)`: the REST GET routes bound to the method, in declaration order.
    var httpGet: [String] = []
    var comment: String?
}

/// Decodes a serialized `FileDescriptorSet`.
func decodeFileDescriptorSet(_ bytes: [UInt8]) throws -> [ProtoFile] {
    try WireReader.records(bytes[...]).filter { $0.number == 1 }.map { try decodeFile($0.bytes("FileDescriptorSet.file")) }
}

/// Source-info paths to leading comments, for one file.
private typealias Comments = [[Int32]: String]

private func decodeFile(_ bytes: ArraySlice<UInt8>) throws -> ProtoFile {
    let records = try WireReader.records(bytes)
    var comments: Comments = [:]
    for record in records where record.number == 9 {
        comments = try decodeSourceCodeInfo(record.bytes("FileDescriptorProto.source_code_info"))
    }
    var file = ProtoFile(comment: comments[[12]])
    var counters = [Int: Int32]()
    func nextIndex(_ number: Int) -> Int32 {
        defer { counters[number, default: 0] += 1 }
        return counters[number, default: 0]
    }
    for record in records {
        switch record.number {
        case 1: file.name = try record.string("FileDescriptorProto.name")
        case 2: file.package = try record.string("FileDescriptorProto.package")
        case 3: file.dependencies.append(try record.string("FileDescriptorProto.dependency"))
        case 4:
            file.messages.append(try decodeMessage(
                record.bytes("FileDescriptorProto.message_type"), scope: file.package,
                path: [4, nextIndex(4)], comments: comments))
        case 5:
            file.enums.append(try decodeEnum(
                record.bytes("FileDescriptorProto.enum_type"), scope: file.package,
                path: [5, nextIndex(5)], comments: comments))
        case 6:
            file.services.append(try decodeService(
                record.bytes("FileDescriptorProto.service"), scope: file.package,
                path: [6, nextIndex(6)], comments: comments))
        case 7: file.extensions.append(try decodeExtension(record.bytes("FileDescriptorProto.extension")))
        case 12: file.syntax = try record.string("FileDescriptorProto.syntax")
        default: break
        }
    }
    return file
}

private func qualified(_ scope: String, _ name: String) -> String {
    scope.isEmpty ? name : "\(scope).\(name)"
}

private func decodeMessage(
    _ bytes: ArraySlice<UInt8>, scope: String, path: [Int32], comments: Comments
) throws -> ProtoMessageDecl {
    let records = try WireReader.records(bytes)
    var message = ProtoMessageDecl(comment: comments[path])
    for record in records where record.number == 1 {
        message.name = try record.string("DescriptorProto.name")
    }
    message.fullName = qualified(scope, message.name)
    var counters = [Int: Int32]()
    func nextPath(_ number: Int) -> [Int32] {
        defer { counters[number, default: 0] += 1 }
        return path + [Int32(number), counters[number, default: 0]]
    }
    for record in records {
        switch record.number {
        case 2:
            let fieldPath = nextPath(2)
            message.fields.append(try decodeField(record.bytes("DescriptorProto.field"), comment: comments[fieldPath]))
        case 3:
            message.messages.append(try decodeMessage(
                record.bytes("DescriptorProto.nested_type"), scope: message.fullName, path: nextPath(3),
                comments: comments))
        case 4:
            message.enums.append(try decodeEnum(
                record.bytes("DescriptorProto.enum_type"), scope: message.fullName, path: nextPath(4),
                comments: comments))
        case 6: message.hasExtensions = true
        case 7:
            for option in try WireReader.records(record.bytes("DescriptorProto.options")) where option.number == 7 {
                message.isMapEntry = try option.varint("MessageOptions.map_entry") != 0
            }
        case 8: message.oneofCount += 1
        default: break
        }
    }
    return message
}

private func decodeField(_ bytes: ArraySlice<UInt8>, comment: String?) throws -> ProtoFieldDecl {
    var field = ProtoFieldDecl(comment: comment)
    for record in try WireReader.records(bytes) {
        switch record.number {
        case 1: field.name = try record.string("FieldDescriptorProto.name")
        case 3: field.number = Int32(truncatingIfNeeded: try record.varint("FieldDescriptorProto.number"))
        case 4:
            guard let label = ProtoFieldDecl.Label(rawValue: try record.varint("FieldDescriptorProto.label")) else {
                throw GeneratorError.malformedDescriptor("unknown label of field \(field.name)")
            }
            field.label = label
        case 5:
            guard let kind = ProtoFieldDecl.Kind(rawValue: try record.varint("FieldDescriptorProto.type")) else {
                throw GeneratorError.malformedDescriptor("unknown type of field \(field.name)")
            }
            field.kind = kind
        case 6: field.typeName = try record.string("FieldDescriptorProto.type_name")
        case 9: field.oneofIndex = Int32(truncatingIfNeeded: try record.varint("FieldDescriptorProto.oneof_index"))
        case 10: field.jsonName = try record.string("FieldDescriptorProto.json_name")
        case 17: field.isProto3Optional = try record.varint("FieldDescriptorProto.proto3_optional") != 0
        default: break
        }
    }
    return field
}

private func decodeExtension(_ bytes: ArraySlice<UInt8>) throws -> ProtoExtensionDecl {
    var decl = ProtoExtensionDecl()
    for record in try WireReader.records(bytes) {
        switch record.number {
        case 1: decl.name = try record.string("FieldDescriptorProto.name")
        case 2: decl.extendee = try record.string("FieldDescriptorProto.extendee")
        case 3: decl.number = Int32(truncatingIfNeeded: try record.varint("FieldDescriptorProto.number"))
        default: break
        }
    }
    return decl
}

private func decodeEnum(
    _ bytes: ArraySlice<UInt8>, scope: String, path: [Int32], comments: Comments
) throws -> ProtoEnumDecl {
    var decl = ProtoEnumDecl(comment: comments[path])
    var valueIndex: Int32 = 0
    for record in try WireReader.records(bytes) {
        switch record.number {
        case 1: decl.name = try record.string("EnumDescriptorProto.name")
        case 2:
            var value = ProtoEnumDecl.Value(comment: comments[path + [2, valueIndex]])
            valueIndex += 1
            for part in try WireReader.records(record.bytes("EnumDescriptorProto.value")) {
                switch part.number {
                case 1: value.name = try part.string("EnumValueDescriptorProto.name")
                case 2: value.number = Int32(truncatingIfNeeded: try part.varint("EnumValueDescriptorProto.number"))
                default: break
                }
            }
            decl.values.append(value)
        default: break
        }
    }
    decl.fullName = qualified(scope, decl.name)
    return decl
}

private func decodeService(
    _ bytes: ArraySlice<UInt8>, scope: String, path: [Int32], comments: Comments
) throws -> ProtoServiceDecl {
    var service = ProtoServiceDecl(comment: comments[path])
    var methodIndex: Int32 = 0
    for record in try WireReader.records(bytes) {
        switch record.number {
        case 1: service.name = try record.string("ServiceDescriptorProto.name")
        case 2:
            var method = ProtoMethodDecl(comment: comments[path + [2, methodIndex]])
            methodIndex += 1
            for part in try WireReader.records(record.bytes("ServiceDescriptorProto.method")) {
                switch part.number {
                case 1: method.name = try part.string("MethodDescriptorProto.name")
                case 2: method.inputType = try part.string("MethodDescriptorProto.input_type")
                case 3: method.outputType = try part.string("MethodDescriptorProto.output_type")
                case 4:
                    for option in try WireReader.records(part.bytes("MethodDescriptorProto.options")) {
                        switch option.number {
                        case 34: method.idempotencyLevel = try option.varint("MethodOptions.idempotency_level")
                        case MethodOptionNumber.access: method.access = try option.varint("MethodOptions.(access)")
                        case MethodOptionNumber.maxRequestBytes:
                            method.maxRequestBytes = try option.varint("MethodOptions.(max_request_bytes)")
                        case MethodOptionNumber.httpGet: method.httpGet.append(try option.string("MethodOptions.(http_get)"))
                        default: break
                        }
                    }
                case 5: method.clientStreaming = try part.varint("MethodDescriptorProto.client_streaming") != 0
                case 6: method.serverStreaming = try part.varint("MethodDescriptorProto.server_streaming") != 0
                default: break
                }
            }
            service.methods.append(method)
        default: break
        }
    }
    service.fullName = qualified(scope, service.name)
    return service
}

private func decodeSourceCodeInfo(_ bytes: ArraySlice<UInt8>) throws -> Comments {
    var comments: Comments = [:]
    for location in try WireReader.records(bytes) where location.number == 1 {
        var path: [Int32] = []
        var leading: String?
        for part in try WireReader.records(location.bytes("SourceCodeInfo.location")) {
            switch (part.number, part.value) {
            case (1, .lengthDelimited(let packed)):
                path = try WireReader.packedVarints(packed).map { Int32(truncatingIfNeeded: $0) }
            case (1, .varint(let element)): path.append(Int32(truncatingIfNeeded: element))
            case (3, _): leading = try part.string("SourceCodeInfo.Location.leading_comments")
            default: break
            }
        }
        if let leading { comments[path] = leading }
    }
    return comments
}

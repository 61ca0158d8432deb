/// Rejects, with a clear message, the proto features the Schema bridge does not support: proto2
/// (and with it groups and required fields), extensions (outside options files), maps, real oneofs, enum aliases,
/// files without a package, names the generated Swift reserves, and an rpc without an access level. Nested messages and enums are supported (they become
/// nested Swift types). Fields and enum values whose Swift names would collide are already
/// rejected by protoc (proto3 JSON-name and enum-prefix checks).
func validate(_ files: [ProtoFile]) throws {
    var packageOfNamespace: [String: String] = [:]
    for file in files {
        guard file.syntax == "proto3" else {
            throw GeneratorError.unsupported("\(file.name): only proto3 is supported, not \(file.syntax.isEmpty ? "proto2" : file.syntax)")
        }
        guard !file.package.isEmpty else {
            throw GeneratorError.unsupported("\(file.name): a package is required; it names the Swift namespace")
        }
        let namespace = Naming.namespace(ofPackage: file.package)
        if let other = packageOfNamespace.updateValue(file.package, forKey: namespace), other != file.package {
            throw GeneratorError.nameClash("packages \(other) and \(file.package) both map to namespace \(namespace)")
        }
        for message in file.messages { try validate(message, in: file, namespace: namespace) }
        for decl in file.enums { try validate(decl, in: file, namespace: namespace) }
        for service in file.services { try validate(service, in: file, namespace: namespace) }
    }
}

/// An options file (`ProtoFile.isOptionsFile`) may declare enums and the method options schema-gen knows
/// (`MethodOptionNumber`), nothing else: any other extension would be silently dropped from the generated code.
func validateOptionsFile(_ file: ProtoFile) throws {
    guard file.syntax == "proto3" else {
        throw GeneratorError.unsupported("\(file.name): only proto3 is supported, not \(file.syntax.isEmpty ? "proto2" : file.syntax)")
    }
    guard file.messages.isEmpty, file.services.isEmpty else {
        throw GeneratorError.unsupported("\(file.name): a file of options (extensions) may declare no messages or services")
    }
    for decl in file.extensions {
        guard decl.extendee == ".google.protobuf.MethodOptions", MethodOptionNumber.known[Int(decl.number)] == decl.name else {
            let known = MethodOptionNumber.known.sorted { $0.key < $1.key }.map { "\($0.value) = \($0.key)" }.joined(separator: ", ")
            throw GeneratorError.unsupported(
                "\(file.name): extension \(decl.name) = \(decl.number) of \(decl.extendee): schema-gen carries only the method "
                    + "options it knows (\(known)); teach it a new one in MethodOptionNumber")
        }
    }
}

/// Type names the generated code relies on, which a generated type must not shadow.
private let reservedTypeNames: Set<String> = [
    "Swift", "Int32", "UInt32", "Int64", "UInt64", "Float", "Double", "Bool", "String", "UInt8", "Array",
    "Optional", "Sendable", "Equatable", "Hashable", "CaseIterable", "ProtoMessage", "ProtoEnum", "ProtoMethod",
    "ProtoMethodInfo", "ProtoReader", "ProtoWriter", "MessageSchema", "ProtobufCCodec", "ProtobufCBridged",
    "SchemaError", "Type", "Protocol", "Self",
    // The JSON mapping's runtime (JSONEmitter).
    "JSONValue", "JSONMember", "JSONNumber", "ProtoJSONMessage", "ProtoJSONEnum", "ProtoJSONField", "ProtoJSONOptions",
    "ProtoJSONError", "ProtoJSONObjectEncoder", "ProtoJSONObjectDecoder", "ProtoFileMessages",
    // Used unqualified by the service API files (`.rpc.swift`).
    "RPC", "Schema", "RPCService", "RPCRouter", "RPCClient", "ServerContext", "CallOptions", "ResponseWriter",
    "RequestStream", "RequestWriter", "ResponseStream", "AsyncSequence", "Error", "Void", "Result",
]

private func validateTypeName(_ name: String, fullName: String, namespace: String) throws {
    if reservedTypeNames.contains(name) || name == namespace {
        throw GeneratorError.nameClash("\(fullName): the Swift name \(name) is reserved in generated code; rename the type")
    }
}

private func validate(_ message: ProtoMessageDecl, in file: ProtoFile, namespace: String) throws {
    try validateTypeName(message.name, fullName: message.fullName, namespace: namespace)
    if message.hasExtensions { throw GeneratorError.unsupported("\(message.fullName): extensions") }
    for field in message.fields {
        let location = "\(message.fullName).\(field.name)"
        if field.oneofIndex != nil && !field.isProto3Optional {
            throw GeneratorError.unsupported("\(location): oneof (only proto3 `optional` is supported)")
        }
        if field.kind == .message, field.label == .repeated,
            message.messages.contains(where: { $0.isMapEntry && "." + $0.fullName == field.typeName })
        {
            throw GeneratorError.unsupported("\(location): map fields")
        }
    }
    for nested in message.messages { try validate(nested, in: file, namespace: namespace) }
    for decl in message.enums { try validate(decl, in: file, namespace: namespace) }
}

private func validate(_ decl: ProtoEnumDecl, in file: ProtoFile, namespace: String) throws {
    try validateTypeName(decl.name, fullName: decl.fullName, namespace: namespace)
    guard decl.values.first?.number == 0 else {
        throw GeneratorError.unsupported("\(decl.fullName): the first value must be 0")
    }
    var numbers: Set<Int32> = []
    for value in decl.values {
        guard numbers.insert(value.number).inserted else {
            throw GeneratorError.unsupported("\(decl.fullName).\(value.name): enum aliases (allow_alias)")
        }
        let caseName = Naming.enumCaseName(value.name, enumName: decl.name)
        if ["unrecognized", "rawValue", "allCases"].contains(caseName) {
            throw GeneratorError.nameClash("\(decl.fullName).\(value.name): the case name \(caseName) is reserved")
        }
    }
}

private func validate(_ service: ProtoServiceDecl, in file: ProtoFile, namespace: String) throws {
    try validateTypeName(service.name, fullName: service.fullName, namespace: namespace)
    // `name` and `methods` are the descriptors' statics; `register` and `rpcClient` belong to the generated service protocol and client.
    var swiftNames: Set<String> = ["name", "methods", "register", "rpcClient"]
    var httpRoutes: [String: String] = [:]
    for method in service.methods {
        let location = "\(service.fullName).\(method.name)"
        let swiftName = Naming.lowerCamelCase(method.name)
        guard swiftNames.insert(swiftName).inserted else {
            throw GeneratorError.nameClash("\(location): the Swift name \(swiftName) is taken")
        }
        // Every rpc says who may call it: a forgotten level must not quietly open a method (or close one).
        guard let access = method.access else {
            throw GeneratorError.unsupported(
                "\(location): no access level: add `option (menagerie.rpc.v1.access) = ACCESS_PUBLIC;` (or ACCESS_USER, "
                    + "ACCESS_ADMIN) from menagerie/rpc/v1/options.proto")
        }
        guard (1...3).contains(access) else {
            throw GeneratorError.unsupported("\(location): access level \(access) is none of ACCESS_PUBLIC, ACCESS_USER, ACCESS_ADMIN")
        }
        if let limit = method.maxRequestBytes, limit == 0 || limit > UInt64(UInt32.max) {
            throw GeneratorError.unsupported("\(location): max_request_bytes must be 1 or more (omit it for the server's default)")
        }
        for route in method.httpGet {
            guard HTTPGetRoute.isValid(route) else {
                throw GeneratorError.unsupported(
                    "\(location): http_get \"\(route)\" is not a route: a path from /, of letters, digits and -._~ segments, "
                        + "whose last segment alone may be a {field}")
            }
            guard httpRoutes.updateValue(location, forKey: route) == nil else {
                throw GeneratorError.nameClash("\(location): http_get \"\(route)\" is bound to another method too")
            }
        }
    }
}

/// The shape of an `http_get` route: `/`-separated segments of URL-safe characters, the last of which alone may be a
/// `{field}` (the pattern `HTTPBinding` matches).
enum HTTPGetRoute {
    static func isValid(_ route: String) -> Bool {
        guard route.hasPrefix("/"), route.count > 1 else { return false }
        let segments = route.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        for (index, segment) in segments.enumerated() {
            if segment.hasPrefix("{") {
                let name = segment.dropFirst().dropLast()
                guard index == segments.count - 1, segment.hasSuffix("}"), let first = name.first, first.isLetter,
                      name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else { return false }
            } else {
                guard !segment.isEmpty, segment.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._~".contains($0)) }) else {
                    return false
                }
            }
        }
        return true
    }
}

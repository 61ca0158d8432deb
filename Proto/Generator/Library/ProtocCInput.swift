/// Rewrites a `FileDescriptorSet` for protoc-c 1.4, which refuses proto3 `optional` fields.
///
/// protoc already describes each `optional` field as the only member of a synthetic oneof; clearing
/// `FieldDescriptorProto.proto3_optional` (field 17) turns that into a plain one-field oneof. The wire
/// format is identical, and protobuf-c then records presence in the oneof's case member, which is what
/// the Schema bridge reads. Every other byte is copied unchanged (comments included).
func protocCInput(from descriptorSet: [UInt8]) throws -> [UInt8] {
    try rewrite(descriptorSet[...], as: .fileSet)
}

private enum DescriptorNode { case fileSet, file, message, field }

private func rewrite(_ bytes: ArraySlice<UInt8>, as node: DescriptorNode) throws -> [UInt8] {
    var output: [UInt8] = []
    output.reserveCapacity(bytes.count)
    for record in try WireReader.records(bytes) {
        let child: DescriptorNode?
        switch (node, record.number) {
        case (.field, 17): continue
        case (.fileSet, 1): child = .file
        case (.file, 4), (.message, 3): child = .message
        case (.message, 2): child = .field
        default: child = nil
        }
        guard let child, case .lengthDelimited(let payload) = record.value else {
            output += record.raw
            continue
        }
        let rewritten = try rewrite(payload, as: child)
        appendVarint(UInt64(record.number) << 3 | 2, to: &output)
        appendVarint(UInt64(rewritten.count), to: &output)
        output += rewritten
    }
    return output
}

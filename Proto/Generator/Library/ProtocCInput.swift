/// Rewrites a `FileDescriptorSet` for protoc-c 1.4, which refuses proto3 `optional` fields and has no C for
/// `google/protobuf/descriptor.proto`.
///
/// protoc already describes each `optional` field as the only member of a synthetic oneof; clearing
/// `FieldDescriptorProto.proto3_optional` (field 17) turns that into a plain one-field oneof. The wire
/// format is identical, and protobuf-c then records presence in the oneof's case member, which is what
/// the Schema bridge reads. The files in `dropped` (the options files and descriptor.proto) leave the set,
/// with the imports of them and the method options they declare (`MethodOptionNumber`), so protoc-c's output
/// is what it was before the options: they are schema-gen's, carried in the Swift method descriptors. Every
/// other byte is copied unchanged (comments included).
func protocCInput(from descriptorSet: [UInt8], dropping dropped: Set<String> = []) throws -> [UInt8] {
    try Rewriter(dropped: dropped).rewrite(descriptorSet[...], as: .fileSet)
}

private struct Rewriter {
    enum Node { case fileSet, file, message, field, service, method, methodOptions }

    let dropped: Set<String>

    func rewrite(_ bytes: ArraySlice<UInt8>, as node: Node) throws -> [UInt8] {
        let records = try WireReader.records(bytes)
        // A file's imports are listed by name (field 3) and referred to by index (public 10, weak 11): the
        // indices of those kept are renumbered.
        var keptDependencies: [Int: Int] = [:]
        var droppedDependencies: Set<Int> = []
        if node == .file {
            var index = 0
            for record in records where record.number == 3 {
                if dropped.contains(try record.string("FileDescriptorProto.dependency")) {
                    droppedDependencies.insert(index)
                } else {
                    keptDependencies[index] = keptDependencies.count
                }
                index += 1
            }
        }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        for record in records {
            let child: Node?
            switch (node, record.number) {
            case (.field, 17): continue
            case (.methodOptions, let number) where MethodOptionNumber.known[number] != nil: continue
            case (.fileSet, 1):
                if try isDropped(record) { continue }
                child = .file
            case (.file, 3):
                if dropped.contains(try record.string("FileDescriptorProto.dependency")) { continue }
                child = nil
            case (.file, 10), (.file, 11):
                let old = Int(try record.varint("FileDescriptorProto.public_dependency"))
                if droppedDependencies.contains(old) { continue }
                guard let new = keptDependencies[old] else {
                    throw GeneratorError.malformedDescriptor("dependency index \(old) out of range")
                }
                appendVarint(UInt64(record.number) << 3, to: &output)
                appendVarint(UInt64(new), to: &output)
                continue
            case (.file, 4), (.message, 3): child = .message
            case (.message, 2): child = .field
            case (.file, 6): child = .service
            case (.service, 2): child = .method
            case (.method, 4): child = .methodOptions
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

    /// Whether a `FileDescriptorSet.file` record is one of the files to leave out.
    private func isDropped(_ file: WireReader.Record) throws -> Bool {
        for record in try WireReader.records(file.bytes("FileDescriptorSet.file")) where record.number == 1 {
            return dropped.contains(try record.string("FileDescriptorProto.name"))
        }
        return false
    }
}

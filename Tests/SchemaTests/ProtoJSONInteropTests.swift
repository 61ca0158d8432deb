import Foundation
import Schema
import Testing

/// Our JSON mapping equals Python protobuf's `json_format` on the same bytes, for a sample of every message
/// of every proto (Tests/SchemaTests/protojson_samples.py fills them from the descriptors): Swift decodes
/// Python's binary and its JSON must parse equal to `MessageToJson`'s under the same options; Swift decodes
/// Python's JSON and its binary must parse equal in Python. Skips without python3-protobuf unless CI=true.
@Suite(
    .enabled(
        if: PythonProtobuf.python != nil || ProcessInfo.processInfo.environment["CI"] == "true",
        "skipped: no python3 with python3-protobuf (apt-get install python3-protobuf; CI=true requires it)"))
struct ProtoJSONInteropTests {
    /// Every generated per-file list, as Proto/generate.sh lists them (Generated/ProtoFiles.swift);
    /// `everyProtoFileIsListed` fails when that list misses a .proto.
    static let files: [ProtoFileMessages] = GeneratedProtoFiles.all

    static var python: Tool? { PythonProtobuf.python }

    static let script = Package.root.appendingPathComponent("Tests/SchemaTests/protojson_samples.py").path

    struct Sample: Decodable {
        let type: String
        let variant: String
        let binary: String
        let json: String
        let jsonDefaults: String
        let jsonProtoNames: String
    }

    struct Samples: Decodable {
        let files: [String: [String]]
        let samples: [Sample]
    }

    static func loadSamples() throws -> Samples {
        let python = try #require(python, "python3 with python3-protobuf is required under CI=true")
        let output = try python.run([script, "samples"])
        return try JSONDecoder().decode(Samples.self, from: Data(output))
    }

    /// The option sets compared, each with the Python output made under the same options.
    static var optionSets: [(name: String, options: ProtoJSONOptions, text: KeyPath<Sample, String>)] {
        [
            ("plain", ProtoJSONOptions(), \.json),
            ("emitDefaults", ProtoJSONOptions(emitDefaults: true), \.jsonDefaults),
            (
                "emitDefaults+protoNames", ProtoJSONOptions(emitDefaults: true, preserveProtoFieldNames: true),
                \.jsonProtoNames
            ),
        ]
    }

    static var typesByName: [String: any ProtoJSONMessage.Type] {
        var types: [String: any ProtoJSONMessage.Type] = [:]
        for file in files { for type in file.messages { types[type.protoName] = type } }
        return types
    }

    @Test func everyProtoFileIsListed() throws {
        // Every proto file with code (the options file, menagerie/rpc/v1/options.proto, has none).
        #expect(
            Set(Self.files.map(\.path)) == Set(Package.protoFiles()).subtracting(["menagerie/rpc/v1/options.proto"]))
        let samples = try Self.loadSamples()
        for file in Self.files {
            #expect(file.messages.map { $0.protoName } == samples.files[file.path], "\(file.path)")
        }
    }

    @Test func swiftJSONEqualsPythonJSONOnPythonBytes() throws {
        let samples = try Self.loadSamples()
        let types = Self.typesByName
        #expect(Set(samples.samples.map(\.type)) == Set(types.keys))
        var compared = 0
        for sample in samples.samples {
            let type = try #require(types[sample.type], "\(sample.type) has no generated Swift type")
            let message = try type.init(serializedBytes: try #require(Base64.decode(sample.binary)))
            for (name, options, text) in Self.optionSets {
                let expected = try JSONValue(parsing: sample[keyPath: text])
                let actual = message.jsonValue(options: options)
                #expect(
                    actual.isSemanticallyEqual(to: expected),
                    "\(sample.type) (\(sample.variant), \(name)):\n swift  \(actual.serialized())\n python \(expected.serialized())"
                )
                // Our own text parses back to the same value.
                #expect(try JSONValue(parsing: actual.serialized(.pretty)) == actual)
                compared += 1
            }
        }
        #expect(compared == types.count * 3 * 3)
    }

    @Test func pythonJSONDecodedInSwiftEncodesPythonsBytes() throws {
        let samples = try Self.loadSamples()
        let types = Self.typesByName
        var cases: [[String: String]] = []
        for sample in samples.samples {
            let type = try #require(types[sample.type])
            for (name, _, text) in Self.optionSets {
                let label = "\(sample.type) (\(sample.variant), \(name))"
                do {
                    let message = try type.init(jsonString: sample[keyPath: text], options: ProtoJSONOptions())
                    cases.append([
                        "label": label, "type": sample.type, "expected": sample.binary,
                        "actual": Base64.encode(message.serializedBytes()),
                    ])
                } catch {
                    Issue.record("\(label): Swift cannot decode Python's JSON: \(error)")
                }
            }
        }
        let input = try JSONSerialization.data(withJSONObject: cases)
        let output = try #require(Self.python).run([Self.script, "check"], input: [UInt8](input))
        let mismatches = try JSONDecoder().decode([String].self, from: Data(output))
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10).joined(separator: "\n"))")
        #expect(cases.count == types.count * 3 * 3)
    }
}

/// A python3 that imports google.protobuf: Debian's first (pyenv's python3 earlier on PATH may not see
/// python3-protobuf).
enum PythonProtobuf {
    static let python: Tool? = {
        for candidate in ["/usr/bin/python3", "/usr/local/bin/python3"] {
            let tool = Tool(url: URL(fileURLWithPath: candidate))
            if (try? tool.run(["-c", "import google.protobuf"])) != nil { return tool }
        }
        return nil
    }()
}

import Testing

@testable import SchemaGenerator

/// What schema-gen writes for the JSON mapping: json_name from the descriptor, a field table and
/// conformance per message (nested too), a name table per enum, and the file's list of message types.
@Suite(.enabled(if: Tool.protoc != nil, "needs protoc (Debian: protobuf-compiler)"))
struct JSONEmitterTests {
    static let source = """
        syntax = "proto3";
        package p.v1;
        enum Top { TOP_UNSPECIFIED = 0; TOP_ONE = 1; }
        message Outer {
          message Inner { enum Mood { MOOD_UNSPECIFIED = 0; MOOD_HAPPY = 1; } Mood mood = 1; }
          int64 box_px = 1;
          string custom = 2 [json_name = "renamed"];
          optional Inner inner = 3;
          repeated Top tops = 4;
          bytes data_2x = 5;
        }
        message Empty {}
        """

    func swiftFile() throws -> String {
        let output = try GeneratorTests().generate(Self.source)
        return try #require(output.files.first { $0.path.hasSuffix("test.pb.swift") }).contents
    }

    @Test func fieldTablesUseTheDescriptorsJSONName() throws {
        let text = try swiftFile()
        #expect(
            text.contains(
                #"ProtoJSONField(number: 1, protoName: "box_px", jsonName: "boxPx", kind: .int64, cardinality: .singular),"#
            ))
        #expect(
            text.contains(
                #"ProtoJSONField(number: 2, protoName: "custom", jsonName: "renamed", kind: .string, cardinality: .singular),"#
            ))
        #expect(
            text.contains(
                #"ProtoJSONField(number: 3, protoName: "inner", jsonName: "inner", kind: .message, cardinality: .optional),"#
            ))
        #expect(
            text.contains(
                #"ProtoJSONField(number: 4, protoName: "tops", jsonName: "tops", kind: .`enum`, cardinality: .repeated),"#
            ))
        #expect(text.contains(#"protoName: "data_2x", jsonName: "data2x""#))
        #expect(
            text.contains("json.repeated(3, self.tops)") && text.contains("try json.optional(2, into: &self.inner)"))
    }

    @Test func everyMessageAndEnumGetsItsMappingAndTheFileItsList() throws {
        let text = try swiftFile()
        for type in ["V1.Outer", "V1.Outer.Inner", "V1.Empty"] {
            #expect(text.contains("extension \(type): ProtoJSONMessage {"), "\(type)")
        }
        for type in ["V1.Top", "V1.Outer.Inner.Mood"] {
            #expect(text.contains("extension \(type): ProtoJSONEnum {"), "\(type)")
        }
        #expect(text.contains(#"("MOOD_HAPPY", 1),"#))
        #expect(
            text.contains(
                """
                    public static let testProtoFile = ProtoFileMessages(
                        path: "test.proto",
                        messages: [
                            V1.Outer.self,
                            V1.Outer.Inner.self,
                            V1.Empty.self,
                        ])
                """))
        #expect(try swiftFile() == text)  // deterministic
    }

    @Test func jsonNameFallsBackToProtocsRule() {
        #expect(ProtoFieldDecl(name: "box_px").jsonNameOrDefault == "boxPx")
        #expect(ProtoFieldDecl(name: "a__b_c").jsonNameOrDefault == "aBC")
        #expect(ProtoFieldDecl(name: "x", jsonName: "y").jsonNameOrDefault == "y")
        #expect(JSONEmitter.fileListName(for: "menagerie/jobs/v1/testing.proto") == "testingProtoFile")
    }
}

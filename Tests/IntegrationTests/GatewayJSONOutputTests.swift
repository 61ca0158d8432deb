import ClassificationAPI
import Foundation
import GatewayKit
import HealthAPI
import OCRAPI
import RPCWire
import Schema
import TestSupport
import Testing
import ZooAPI

/// What `--json` prints, through the gateway executable: each service's output is protobuf's JSON mapping of its
/// response (read back strictly as that message, unknown members refused, and printed again the same), and a
/// failure is one JSON object `{"code", "message"}` on standard error with the exit status of its code.
@Suite(.serialized) struct GatewayJSONOutputTests {
    /// Runs the gateway with standard output and standard error kept apart: a script reads only the first.
    static func gateway(_ arguments: [String], environment: [String: String] = [:]) async throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try await offPool {
            try runSeparatingOutput("\(Stack.binDirectory)/gateway", arguments, environment: environment)
        }
    }

    func gateway(_ stack: Stack, _ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String)
    {
        var environment = stack.environment
        environment["XDG_DATA_HOME"] = stack.directory.appendingPathComponent("xdg").path
        environment.removeValue(forKey: "MENAGERIE_HEALTH_TOKEN")
        return try await Self.gateway(arguments + ["--state", stack.state.path], environment: environment)
    }

    /// Standard output as one JSON value; anything beside it fails.
    static func json(
        _ result: (status: Int32, stdout: String, stderr: String), sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> JSONValue {
        try #require(result.status == 0, "\(result.stdout)\(result.stderr)", sourceLocation: sourceLocation)
        return try JSONParser.parse(result.stdout)
    }

    /// `value` read strictly as `Message`'s JSON mapping, and the message printed again as the gateway prints it
    /// gives the same JSON: the output is the mapping, no member more or less.
    @discardableResult
    static func mapping<Message: ProtoJSONMessage>(
        _ value: JSONValue, as type: Message.Type, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Message {
        let message = try Message(jsonValue: value, options: ProtoJSONOptions())
        #expect(
            message.outputJSON.isSemanticallyEqual(to: value), "\(value.serialized())", sourceLocation: sourceLocation)
        return message
    }

    /// The error shape: exactly one JSON object with `code` and `message` and nothing else on standard error, and
    /// nothing on standard output (which carries only results).
    static func expectError(
        _ result: (status: Int32, stdout: String, stderr: String), exit: Int32, code: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(result.status == exit, "\(result)", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, "\(result.stdout)", sourceLocation: sourceLocation)
        let value = try JSONParser.parse(result.stderr)
        #expect(
            value.objectValue?.map(\.key) == ["code", "message"], "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(value["code"] == .string(code), "\(result.stderr)", sourceLocation: sourceLocation)
        let message = value["message"]?.stringValue ?? ""
        #expect(message.count > 0, "\(result.stderr)", sourceLocation: sourceLocation)
    }

    @Test func failuresPrintOneJSONErrorAndExitWithTheirCode() async throws {
        try await Stack.with(services: ["zoo"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            try Self.expectError(
                try await gateway(stack, ["zoo", "show", "999999", "--json"]), exit: 5, code: "not_found")
            // Without --json the failure goes to standard error only.
            let plain = try await gateway(stack, ["zoo", "show", "999999"])
            #expect(plain.status == 5 && plain.stdout.isEmpty && plain.stderr.contains("NOT_FOUND"), "\(plain)")
        }
        // Health's commands pass --json on too: a failure on the device's store, and one before any call.
        let store = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gateway-json-\(UUID().uuidString).sqlite")
        defer { try? FileManager.default.removeItem(at: store) }
        try Self.expectError(
            try await Self.gateway([
                "health", "show", UUID().uuidString, "--local", "--store", store.path, "--token", "t", "--json",
            ]),
            exit: 5, code: "not_found")
        try Self.expectError(
            try await Self.gateway(
                ["health", "account", "--endpoint", "health=127.0.0.1:1", "--json"],
                environment: ["XDG_DATA_HOME": store.path + ".xdg"]),
            exit: 16, code: "unauthenticated")
        // The stack-wide commands too: nothing listens, so the call is UNAVAILABLE.
        try Self.expectError(
            try await Self.gateway(["methods", "zoo", "--endpoint", "zoo=127.0.0.1:1", "--timeout", "2", "--json"]),
            exit: 14, code: "unavailable")
    }

    @Test func everyServicePrintsItsResponsesJSONMapping() async throws {
        try await Stack.with(services: ["zoo", "ocr", "health", "classification"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")

            // Zoo, OCR.
            try Self.mapping(
                try Self.json(try await gateway(stack, ["zoo", "search", "--json"])),
                as: ZooV1.SearchAnimalsResponse.self)
            try Self.mapping(
                try Self.json(try await gateway(stack, ["ocr", "template", "list", "--json"])),
                as: OcrV1.ListTemplatesResponse.self)

            // Health: int64 as strings (a fresh account's anchor and sample count).
            let user = try Self.mapping(
                try Self.json(try await gateway(stack, ["health", "user", "create", "jana", "--json"])),
                as: HealthV1.CreateUserResponse.self)
            let account = try Self.json(
                try await gateway(stack, ["health", "account", "--token", user.token, "--json"]))
            try Self.mapping(account, as: HealthV1.GetAccountResponse.self)
            #expect(
                account["sampleCount"] == .string("0") && account["anchor"]?.stringValue != nil,
                "\(account.serialized())")

            // Classification: int64 as strings, fields at their defaults printed.
            let catalogue = stack.directory.appendingPathComponent("catalogue.json")
            try #"[{"label": "3", "name": "Three", "local_name": "Trojka"}]"#.write(
                to: catalogue, atomically: true, encoding: .utf8)
            let imported = try Self.json(
                try await gateway(stack, ["classify", "catalogue", "import", catalogue.path, "--json"]))
            try Self.mapping(imported, as: ClassificationV1.ImportCatalogueResponse.self)
            #expect(imported["entries"] == .string("1"), "\(imported.serialized())")
            let entry = try Self.json(try await gateway(stack, ["classify", "catalogue", "show", "3", "--json"]))
            try Self.mapping(entry, as: ClassificationV1.CatalogueEntry.self)
            #expect(
                entry["localName"] == .string("Trojka") && entry["attributes"] == .array([]), "\(entry.serialized())")
            try Self.mapping(
                try Self.json(try await gateway(stack, ["classify", "model", "list", "--json"])),
                as: ClassificationV1.ListModelsResponse.self)

            // Stack-wide: status and stats print one object per instance (which one, then its response's fields).
            let status = try #require(try Self.json(try await gateway(stack, ["status", "--json"])).arrayValue)
            #expect(status.count == 4, "\(status)")
            for instance in status {
                #expect(
                    instance["health"] == .string("SERVING") && instance["status"] == .string("SERVING_STATUS_SERVING"),
                    "\(instance.serialized())")
                #expect(
                    instance["pid"]?.stringValue.flatMap { Int32($0) } != nil,
                    "int64 as a string: \(instance.serialized())")
                let reply = JSONValue.object(
                    (instance.objectValue ?? []).filter { !["service", "address", "health"].contains($0.key) })
                try Self.mapping(reply, as: RpcV1.HealthCheckResponse.self)
            }
            let stats = try #require(try Self.json(try await gateway(stack, ["stats", "zoo", "--json"])).arrayValue)
            #expect(stats.count == 1 && stats[0]["address"]?.stringValue != nil, "\(stats)")
            let figures = JSONValue.object((stats[0].objectValue ?? []).filter { $0.key != "address" })
            try Self.mapping(figures, as: RpcV1.GetStatsResponse.self)
            #expect(
                figures["totalConnections"]?.stringValue.flatMap { UInt64($0) } != nil,
                "uint64 as a string: \(figures.serialized())")
            // The process's memory budget: the server's (256 MiB unless --memory-budget says otherwise).
            #expect(
                figures["memory"]?["limitBytes"] == .string("\(256 << 20)"),
                "\(figures["memory"]?.serialized() ?? "no memory")")
            let methods = try Self.mapping(
                try Self.json(try await gateway(stack, ["methods", "zoo", "--json"])),
                as: RpcV1.ListServicesResponse.self)
            #expect(methods.services.flatMap(\.methods).contains { $0.path == "/menagerie.zoo.v1.Zoo/SearchAnimals" })
        }
    }
}

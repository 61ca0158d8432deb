import ArgumentParser
import Foundation
import RPC
import Schema

/// What `--json` prints: protobuf's JSON mapping of the response (lowerCamelCase names, 64-bit integers as
/// strings, enums by name), with fields at their defaults printed so a script finds every field (a box at
/// x = 0 still shows `x`). Unset `optional` and message fields stay absent.
extension ProtoJSONOptions {
    public static let gatewayOutput = ProtoJSONOptions(emitDefaults: true)
}

extension ProtoJSONMessage {
    /// The message as the gateway's `--json` prints it.
    public var outputJSON: JSONValue { jsonValue(options: .gatewayOutput) }
}

/// Prints a JSON value, two-space indented.
public func printJSON(_ value: JSONValue) {
    print(value.serialized(.pretty))
}

extension GlobalOptions {
    /// With `--json`, prints the JSON mapping of `message`; else runs `text`.
    public func render(_ message: some ProtoJSONMessage, text: () throws -> Void) throws {
        if json { printJSON(message.outputJSON) } else { try text() }
    }

    /// With `--json`, prints `value` (a JSON array of mapped responses, for a command that prints several);
    /// else runs `text`.
    public func render(jsonValue value: () throws -> JSONValue, text: () throws -> Void) throws {
        if json { printJSON(try value()) } else { try text() }
    }
}

extension RPCError {
    /// The one JSON shape of a failure: `{"code": "not_found", "message": "..."}`.
    public var outputJSON: JSONValue { errorJSON(code: code.connectName, message: message) }
}

import Foundation
import GatewayKit
import Testing

/// Issue 38: a `MENAGERIE_TLS_DIR` that holds no CA is an error the gateway reports (exit 66), not a reason to call in
/// plaintext — it fell back to plaintext, so a TLS stack answered "accepts TLS connections only" and a plaintext one
/// would have been called without the TLS the user asked for.
@Suite struct ClientTLSTests {
    @Test func aTLSDirectoryWithoutItsCAIsAnErrorNotPlaintext() throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        do {
            _ = try ClientTLSOptions.parse([]).credentials(
                stateDirectory: nil, environment: ["MENAGERIE_TLS_DIR": empty.path])
            Issue.record("an empty MENAGERIE_TLS_DIR gave credentials (or plaintext) instead of an error")
        } catch let error as FileError {
            #expect(
                error.kind == .missing && error.exitCode == 66 && error.description.contains("MENAGERIE_TLS_DIR"),
                "\(error)")
        }
        // Without the variable (and no compose state in a scratch directory), plaintext is what is asked for.
        #expect(try ClientTLSOptions.parse([]).credentials(stateDirectory: empty.path, environment: [:]) == nil)
    }
}

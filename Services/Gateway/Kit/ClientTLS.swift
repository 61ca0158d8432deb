import ArgumentParser
import Base
import Foundation
import Transport

/// Where the gateway finds its TLS client certificate and the stack's CA: `--tls-ca`, `--tls-cert` and
/// `--tls-key`, else `MENAGERIE_TLS_DIR`, else what `compose up --tls` made in compose's state
/// (`tls/ca.pem`, `tls/gateway.pem`, `tls/gateway.key`), found as the endpoints are. None of these:
/// plaintext; a `MENAGERIE_TLS_DIR` without its CA is an error (exit 66), never plaintext.
public struct ClientTLSOptions: ParsableArguments, Sendable {
    @Option(
        name: .customLong("tls-ca"),
        help:
            "The CA that signs the services' certificates (PEM): calls go over TLS (default: $MENAGERIE_TLS_DIR, else compose's state when it made one)."
    )
    public var caFile: String?

    @Option(
        name: .customLong("tls-cert"),
        help:
            "The gateway's client certificate (PEM) for mutual TLS (default: gateway.pem beside the CA in $MENAGERIE_TLS_DIR or compose's state; none with --tls-ca)."
    )
    public var certificateFile: String?

    @Option(
        name: .customLong("tls-key"),
        help: "The private key of --tls-cert (PEM; default: gateway.key beside gateway.pem).")
    public var keyFile: String?

    public init() {}

    public func validate() throws {
        if caFile == nil, certificateFile != nil || keyFile != nil {
            throw ValidationError(
                "--tls-cert and --tls-key need --tls-ca (the CA that signs the services' certificates)")
        }
        if (certificateFile == nil) != (keyFile == nil) {
            throw ValidationError("--tls-cert and --tls-key go together")
        }
    }

    /// The credentials to call with, nil for plaintext; `stateDirectory` as `--state` gave it.
    public func credentials(
        stateDirectory: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> TLSCredentials? {
        if let caFile {
            return try TLSCredentials.client(certificateFile: certificateFile, keyFile: keyFile, caFile: caFile)
        }
        let directory: URL
        if let variable = environment["MENAGERIE_TLS_DIR"], !variable.isEmpty {
            // Named on purpose: a directory without the CA is a mistake to report, never a reason to call in plaintext
            // (the gateway fell back to it, and a TLS stack then answered "accepts TLS connections only").
            directory = URL(fileURLWithPath: variable)
            let ca = directory.appendingPathComponent("ca.pem").path
            guard FileManager.default.isReadableFile(atPath: ca) else {
                throw FileError(
                    FileManager.default.fileExists(atPath: ca) ? .unreadable : .missing, path: ca,
                    reason:
                        "MENAGERIE_TLS_DIR names a directory without the stack's CA (ca.pem); calls would not be over TLS",
                    role: "the CA of MENAGERIE_TLS_DIR")
            }
        } else if let state = stateDirectory ?? environment["MENAGERIE_STATE_DIR"] {
            directory = URL(fileURLWithPath: state).appendingPathComponent("tls")
        } else if let found = UpwardSearch.find(
            "compose/.state/tls/ca.pem", from: [UpwardSearch.workingDirectory, UpwardSearch.executableDirectory])
        {
            directory = found.deletingLastPathComponent()
        } else {
            return nil
        }
        let ca = directory.appendingPathComponent("ca.pem").path
        guard FileManager.default.fileExists(atPath: ca) else { return nil }
        let certificate = directory.appendingPathComponent("gateway.pem").path
        let key = directory.appendingPathComponent("gateway.key").path
        let hasPair = FileManager.default.fileExists(atPath: certificate) && FileManager.default.fileExists(atPath: key)
        return try TLSCredentials.client(
            certificateFile: hasPair ? certificate : nil, keyFile: hasPair ? key : nil, caFile: ca)
    }
}

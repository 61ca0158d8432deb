import Foundation

/// A private CA and certificates it signs, made by the `openssl` program in a temporary directory
/// (as `compose up --tls` makes the stack's): what TLS tests present and verify. EC P-256 keys, so
/// making them takes milliseconds.
public final class TestCertificates: @unchecked Sendable {
    public let directory: URL
    public let name: String
    public var caFile: String { directory.appendingPathComponent("\(name)-ca.pem").path }
    private var caKey: String { directory.appendingPathComponent("\(name)-ca.key").path }

    /// A new CA called `name` (its certificate's CN), in `directory` (a new temporary one by default).
    public init(name: String = "Test CA", in directory: URL? = nil) throws {
        self.directory =
            directory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("menagerie-tls-\(UUID().uuidString)")
        self.name = name.replacingOccurrences(of: " ", with: "-")
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
        try Self.openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", caKey, "-out", caFile, "-days", "3650", "-subj", "/CN=\(name)",
        ])
    }

    /// A certificate and key for `commonName` signed by this CA, valid for `days` from now (negative:
    /// expired that many days ago), for loopback addresses (IP 127.0.0.1 and ::1, DNS localhost),
    /// usable by servers and clients alike, its subject naming `unit` as its OU when given (a cluster role). Files
    /// `<file>.pem` and `<file>.key`.
    @discardableResult
    public func issue(_ commonName: String, file: String? = nil, days: Int = 30, unit: String? = nil) throws -> (
        certificate: String, key: String
    ) {
        let base = directory.appendingPathComponent(file ?? commonName).path
        let extensions = base + ".ext"
        try "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"
            .write(toFile: extensions, atomically: true, encoding: .utf8)
        try Self.openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", base + ".key", "-out", base + ".csr", "-subj",
            "/CN=\(commonName)" + (unit.map { "/OU=\($0)" } ?? ""),
        ])
        try Self.openssl([
            "x509", "-req", "-in", base + ".csr", "-CA", caFile, "-CAkey", caKey, "-CAcreateserial",
            "-days", String(days), "-extfile", extensions, "-out", base + ".pem",
        ])
        return (base + ".pem", base + ".key")
    }

    public func remove() { try? FileManager.default.removeItem(at: directory) }

    /// Runs `openssl` with `arguments`; throws its stderr when it fails.
    public static func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CertificateError(
                message: "openssl \(arguments.first ?? "") failed: \(String(decoding: message, as: UTF8.self))")
        }
    }

    public struct CertificateError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }
}

import Base
import Foundation
import Synchronization
import TCP
import TLS

/// A TLS side's certificate files, loaded into the context new connections use, and loaded again on
/// demand (a service's SIGHUP): connections already open keep the context they started with, so a
/// renewed certificate takes over without dropping anyone. A reload that fails keeps the old one.
public final class TLSCredentials: Sendable {
    /// Our protocol's ALPN name; HTTP/1.1 is `http/1.1`.
    public static let binaryProtocol = "menagerie"
    public static let httpProtocol = "http/1.1"

    public let role: TLSContext.Role
    public let certificateFile: String?
    public let keyFile: String?
    public let caFile: String
    private let current: Mutex<TLSContext>

    /// A server's credentials: it presents `certificateFile`, and on the binary protocol requires a
    /// client certificate signed by `caFile` (mutual TLS); HTTP clients need none (browsers, curl),
    /// and authenticate by token.
    public static func server(certificateFile: String, keyFile: String, caFile: String) throws(TLSError)
        -> TLSCredentials
    {
        try TLSCredentials(role: .server, certificateFile: certificateFile, keyFile: keyFile, caFile: caFile)
    }

    /// A client's credentials: it verifies servers against `caFile` and presents `certificateFile`
    /// when a server asks (the binary protocol always does).
    public static func client(certificateFile: String?, keyFile: String?, caFile: String) throws(TLSError)
        -> TLSCredentials
    {
        try TLSCredentials(role: .client, certificateFile: certificateFile, keyFile: keyFile, caFile: caFile)
    }

    private init(role: TLSContext.Role, certificateFile: String?, keyFile: String?, caFile: String) throws(TLSError) {
        self.role = role
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.caFile = caFile
        current = Mutex(try Self.load(role, certificateFile, keyFile, caFile))
    }

    private static func load(_ role: TLSContext.Role, _ certificate: String?, _ key: String?, _ ca: String)
        throws(TLSError) -> TLSContext
    {
        switch role {
        case .server:
            try TLSContext(
                role: .server, certificateFile: certificate, keyFile: key, caFile: ca,
                protocols: [binaryProtocol, httpProtocol], clientCertificateRequired: [binaryProtocol])
        case .client:
            try TLSContext(
                role: .client, certificateFile: certificate, keyFile: key, caFile: ca, protocols: [binaryProtocol])
        }
    }

    /// The context a new connection uses.
    public var context: TLSContext { current.withLock { $0 } }

    /// Loads the files again; new connections use them from now on. Throws (keeping the old ones)
    /// when they do not load. Returns what the new certificate says about itself.
    @discardableResult
    public func reload() throws(TLSError) -> CertificateInfo? {
        let fresh = try Self.load(role, certificateFile, keyFile, caFile)
        current.withLock { $0 = fresh }
        return fresh.certificate
    }
}

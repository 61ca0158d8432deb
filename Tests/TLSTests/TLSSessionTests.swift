import Foundation
import TLS
import TestSupport
import Testing

/// Two sessions talking through memory: the handshake, ALPN, mutual TLS and the errors people meet.
@Suite struct TLSSessionTests {
    let certificates: TestCertificates
    let server: (certificate: String, key: String)
    let client: (certificate: String, key: String)

    init() throws {
        certificates = try TestCertificates()
        server = try certificates.issue("zoo")
        client = try certificates.issue("gateway")
    }

    func serverContext(ca: String? = nil, certificate: (certificate: String, key: String)? = nil) throws -> TLSContext {
        let pair = certificate ?? server
        return try TLSContext(
            role: .server, certificateFile: pair.certificate, keyFile: pair.key, caFile: ca ?? certificates.caFile,
            protocols: ["menagerie", "http/1.1"], clientCertificateRequired: ["menagerie"])
    }

    func clientContext(
        _ pair: (certificate: String, key: String)?, ca: String? = nil, protocols: [String] = ["menagerie"]
    ) throws -> TLSContext {
        try TLSContext(
            role: .client, certificateFile: pair?.certificate, keyFile: pair?.key, caFile: ca ?? certificates.caFile,
            protocols: protocols)
    }

    /// Moves ciphertext both ways until neither side has any to send; returns each side's error, if any.
    @discardableResult
    func pump(_ a: TLSSession, _ b: TLSSession) -> (client: TLSError?, server: TLSError?) {
        var errors: (client: TLSError?, server: TLSError?) = (nil, nil)
        for _ in 0..<20 {
            var moved = false
            for (from, to) in [(a, b), (b, a)] {
                var buffer = [UInt8](repeating: 0, count: from.pendingCiphertext)
                if buffer.isEmpty { continue }
                let count = buffer.withUnsafeMutableBytes { from.drainCiphertext(into: $0) }
                buffer.withUnsafeBytes { to.feed(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                moved = true
                do {
                    if to.isHandshakeDone {
                        var plain = [UInt8](repeating: 0, count: 1 << 16)
                        _ = try plain.withUnsafeMutableBytes { try to.read(into: $0) }
                    } else {
                        _ = try to.handshake()
                    }
                } catch let error as TLSError {
                    if to === a {
                        errors.client = errors.client ?? error
                    } else {
                        errors.server = errors.server ?? error
                    }
                } catch {
                    Issue.record("unexpected \(error)")
                }
            }
            if !moved { break }
        }
        return errors
    }

    func start(_ client: TLSSession, _ server: TLSSession) -> (client: TLSError?, server: TLSError?) {
        _ = try? client.handshake()
        return pump(client, server)
    }

    /// A server name OpenSSL cannot check (an address that is none) is an error, and the session made for it is
    /// freed once: the failed init freed it and then `deinit` freed it again.
    @Test func aServerNameThatCannotBeCheckedIsAnErrorAndTheSessionIsFreedOnce() throws {
        let context = try clientContext(client)
        for name in ["999.1.1.1", "1.2.3", "::zz"] {
            #expect(throws: TLSError.self, "\(name)") { try TLSSession(context: context, serverName: name) }
        }
        _ = try TLSSession(context: context, serverName: "127.0.0.1")  // the context still makes sessions
    }

    /// The transport's way, a copy fewer each way: records go to a sink as OpenSSL seals them, and are read straight
    /// from lent bytes, which arrive in pieces that cut records anywhere (what a loan leaves unread is kept for the next).
    @Test func recordsGoToASinkAndAreReadFromLentPiecesCutAnywhere() throws {
        let c = try TLSSession(context: clientContext(client), serverName: "127.0.0.1")
        let s = try TLSSession(context: serverContext())
        let errors = start(c, s)
        #expect(errors.client == nil && errors.server == nil)
        var sunk: [UInt8] = []
        c.sendCiphertext { sunk += $0 }
        let message = Array((0..<150_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try message.withUnsafeBytes { try c.write($0) }
        #expect(c.pendingCiphertext == 0, "nothing kept once a sink takes the records")
        #expect(sunk.count > message.count)
        var received: [UInt8] = []
        var plain = [UInt8](repeating: 0, count: 1 << 14)
        var offset = 0, piece = 1
        while offset < sunk.count {
            let end = min(sunk.count, offset + piece)
            try Array(sunk[offset..<end]).withUnsafeBytes { bytes in
                s.lend(bytes)
                defer { s.keepUnread() }
                while true {
                    let (count, _) = try plain.withUnsafeMutableBytes { try s.read(into: $0) }
                    if count == 0 { break }
                    received += plain[..<count]
                }
            }
            offset = end
            // 1, 8, 29, … bytes: a record's header cut, a record cut, several records at once
            piece = piece % 40_000 * 3 + 5
        }
        #expect(received == message)
    }

    @Test func mutualTLSCarriesBytesBothWaysAndNamesTheProtocolAndPeer() throws {
        let c = try TLSSession(context: clientContext(client), serverName: "127.0.0.1")
        let s = try TLSSession(context: serverContext())
        let errors = start(c, s)
        #expect(errors.client == nil && errors.server == nil)
        #expect(c.isHandshakeDone && s.isHandshakeDone)
        #expect(c.negotiatedProtocol == "menagerie" && s.negotiatedProtocol == "menagerie")
        #expect(s.peerCertificate?.subject == "CN=gateway")
        #expect(c.peerCertificate?.subject == "CN=zoo")
        #expect((c.peerCertificate?.notAfter ?? .distantPast) > Date())

        let message = Array((0..<100_000).map { UInt8(truncatingIfNeeded: $0) })
        try message.withUnsafeBytes { try c.write($0) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: c.pendingCiphertext)
        let count = buffer.withUnsafeMutableBytes { c.drainCiphertext(into: $0) }
        buffer.withUnsafeBytes { s.feed(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        var plain = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let (n, progress) = try plain.withUnsafeMutableBytes { try s.read(into: $0) }
            if n == 0 {
                #expect(progress == .wantsMore)
                break
            }
            received += plain[..<n]
        }
        #expect(received == message)
    }

    @Test func theBinaryProtocolRefusesAClientWithoutACertificate() throws {
        let c = try TLSSession(context: clientContext(nil), serverName: "127.0.0.1")
        let s = try TLSSession(context: serverContext())
        let errors = start(c, s)
        #expect(errors.server?.message.contains("peer did not return a certificate") == true)
        // TLS 1.3: the client finished its side; the server's alert arrives with the next read.
        #expect(errors.client?.message.contains("certificate required") == true)
    }

    @Test func httpNeedsNoClientCertificate() throws {
        let c = try TLSSession(context: clientContext(nil, protocols: ["http/1.1"]), serverName: "localhost")
        let s = try TLSSession(context: serverContext())
        let errors = start(c, s)
        #expect(errors.client == nil && errors.server == nil)
        #expect(s.negotiatedProtocol == "http/1.1")
        #expect(s.peerCertificate == nil)
    }

    @Test func aCertificateOfAnotherCAIsRefusedByEitherSide() throws {
        let stranger = try TestCertificates(name: "Other CA")
        defer { stranger.remove() }
        let foreign = try stranger.issue("intruder")
        // A client certificate from another CA.
        var c = try TLSSession(context: clientContext(foreign), serverName: "127.0.0.1")
        var s = try TLSSession(context: serverContext())
        var errors = start(c, s)
        #expect(
            errors.server?.message.contains(
                "the client's certificate is refused: unable to get local issuer certificate") == true)
        #expect(errors.client?.message.contains("unknown ca") == true)
        // A server certificate from another CA.
        c = try TLSSession(context: clientContext(client), serverName: "127.0.0.1")
        s = try TLSSession(context: serverContext(certificate: foreign))
        errors = start(c, s)
        #expect(
            errors.client?.message.contains(
                "the server's certificate is refused: unable to get local issuer certificate") == true)
        #expect(errors.server?.message.contains("unknown ca") == true)
    }

    @Test func anExpiredCertificateIsRefused() throws {
        let expired = try certificates.issue("old", days: -1)
        let c = try TLSSession(context: clientContext(expired), serverName: "127.0.0.1")
        let s = try TLSSession(context: serverContext())
        let errors = start(c, s)
        #expect(errors.server?.message.contains("certificate has expired") == true)
        #expect(errors.client?.message.contains("certificate expired") == true)
    }

    @Test func theServerMustCarryTheNameTheClientDialled() throws {
        let c = try TLSSession(context: clientContext(client), serverName: "10.1.2.3")
        let s = try TLSSession(context: serverContext())
        let errors = start(c, s)
        #expect(errors.client?.message.contains("IP address mismatch") == true)
    }

    @Test func filesThatDoNotLoadSayWhich() throws {
        #expect(throws: TLSError("TLS certificate /nonexistent.pem does not exist or cannot be read")) {
            try TLSContext(
                role: .server, certificateFile: "/nonexistent.pem", keyFile: server.key, caFile: nil, protocols: [])
        }
        let other = try certificates.issue("other")
        let error = #expect(throws: TLSError.self) {
            try TLSContext(
                role: .server, certificateFile: server.certificate, keyFile: other.key, caFile: nil, protocols: [])
        }
        #expect(error?.message.contains("key values mismatch") == true, "\(String(describing: error))")
        let garbage = certificates.directory.appendingPathComponent("garbage.pem").path
        try "not a certificate".write(toFile: garbage, atomically: true, encoding: .utf8)
        let bad = #expect(throws: TLSError.self) {
            try TLSContext(role: .client, certificateFile: nil, keyFile: nil, caFile: garbage, protocols: [])
        }
        #expect(bad?.message.contains("TLS CA \(garbage) does not load") == true)
        #expect(throws: TLSError("TLS needs the CA that signs the peer's certificates (--tls-ca)")) {
            try TLSContext(role: .client, certificateFile: nil, keyFile: nil, caFile: nil, protocols: [])
        }
    }
}

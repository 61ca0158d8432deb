import CTLS
import Foundation

/// What went wrong in TLS, in words a person can act on: the file that does not load, the
/// certificate the peer refused or we refused (expired, signed by another CA), OpenSSL's own reason.
public struct TLSError: Error, CustomStringConvertible, Equatable, Sendable {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }

    /// `what` failed, with the reasons OpenSSL queued on this thread (the queue is emptied).
    static func openSSL(_ what: String) -> TLSError {
        let reasons = drainErrors()
        return TLSError(reasons.isEmpty ? what : "\(what): \(reasons.joined(separator: "; "))")
    }

    /// The reasons OpenSSL queued on this thread, oldest first, without its codes and file names.
    static func drainErrors() -> [String] {
        var reasons: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            if let reason = ERR_reason_error_string(code) {
                let text = String(cString: reason)
                if !reasons.contains(text) { reasons.append(text) }
            } else {
                reasons.append("error \(code)")
            }
        }
        return reasons
    }
}

/// The certificates and rules of one side of TLS connections, loaded once from PEM files and shared
/// by every connection made with it (OpenSSL's `SSL_CTX`): TLS 1.3 only, the protocols offered by
/// ALPN, and whether the peer must present a certificate signed by the CA. Immutable once made; to
/// take new certificates (SIGHUP) make a new one: connections keep the context they started with.
public final class TLSContext: @unchecked Sendable {  // SSL_CTX is safe to share once configured
    public enum Role: Sendable { case server, client }

    let raw: OpaquePointer
    public let role: Role
    /// Protocols offered (client) or accepted (server) by ALPN, in order of preference.
    public let protocols: [String]
    /// Server: protocols whose clients must present a certificate signed by the CA (mutual TLS);
    /// others are asked for none. A client that offers no ALPN at all is held to it too.
    public let clientCertificateRequired: Set<String>
    /// ALPN's wire form of `protocols` (length-prefixed names), kept alive for OpenSSL.
    private let wireProtocols: [UInt8]
    /// What the certificate says about itself (subject, expiry), for logs and tests.
    public let certificate: CertificateInfo?

    /// - Parameters:
    ///   - certificateFile, keyFile: our certificate chain and its private key (PEM); a server needs
    ///     them, a client presents them when the server asks (mutual TLS).
    ///   - caFile: the CA that signs peers' certificates (PEM); peers are verified against it alone.
    ///     A client without it cannot verify the server and is refused (no unverified TLS here).
    ///   - protocols: ALPN names, most preferred first.
    ///   - clientCertificateRequired: see the property (server only).
    public init(
        role: Role, certificateFile: String?, keyFile: String?, caFile: String?, protocols: [String],
        clientCertificateRequired: Set<String> = []
    ) throws(TLSError) {
        ERR_clear_error()
        guard let ctx = SSL_CTX_new(role == .server ? TLS_server_method() : TLS_client_method()) else {
            throw TLSError.openSSL("cannot make a TLS context")
        }
        raw = ctx
        self.role = role
        self.protocols = protocols
        self.clientCertificateRequired = clientCertificateRequired
        var wire: [UInt8] = []
        for name in protocols {
            guard !name.isEmpty, name.utf8.count < 256 else {
                SSL_CTX_free(ctx)
                throw TLSError("ALPN protocol name '\(name)' must be 1 to 255 bytes")
            }
            wire.append(UInt8(name.utf8.count))
            wire += name.utf8
        }
        wireProtocols = wire
        var info: CertificateInfo?
        do throws(TLSError) {
            guard ctls_set_min_tls13(ctx) == 1 else { throw TLSError.openSSL("cannot require TLS 1.3") }
            // Writes of any size go through whole (the memory BIO takes everything), and the
            // plaintext buffer may move between retries.
            _ = ctls_ctx_set_mode(ctx, Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS))
            // No session tickets: connections are long-lived and resumption would only cost a
            // message and a signature per connection.
            SSL_CTX_set_num_tickets(ctx, 0)
            // AES-128-GCM first: as safe for our use and a third cheaper per byte than OpenSSL's default
            // first choice, AES-256-GCM (both in hardware here).
            guard
                SSL_CTX_set_ciphersuites(
                    ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") == 1
            else {
                throw TLSError.openSSL("cannot set the TLS 1.3 cipher suites")
            }
            if let certificateFile {
                guard FileManager.default.isReadableFile(atPath: certificateFile) else {
                    throw TLSError("TLS certificate \(certificateFile) does not exist or cannot be read")
                }
                guard SSL_CTX_use_certificate_chain_file(ctx, certificateFile) == 1 else {
                    throw TLSError.openSSL("TLS certificate \(certificateFile) does not load")
                }
                info = SSL_CTX_get0_certificate(ctx).map(CertificateInfo.init)
            }
            if let keyFile {
                guard FileManager.default.isReadableFile(atPath: keyFile) else {
                    throw TLSError("TLS key \(keyFile) does not exist or cannot be read")
                }
                guard SSL_CTX_use_PrivateKey_file(ctx, keyFile, SSL_FILETYPE_PEM) == 1 else {
                    throw TLSError.openSSL("TLS key \(keyFile) does not load")
                }
                guard SSL_CTX_check_private_key(ctx) == 1 else {
                    throw TLSError.openSSL(
                        "TLS key \(keyFile) does not match certificate \(certificateFile ?? "(none)")")
                }
            }
            if role == .server, certificateFile == nil || keyFile == nil {
                throw TLSError("a TLS server needs a certificate and its key")
            }
            if let caFile {
                guard FileManager.default.isReadableFile(atPath: caFile) else {
                    throw TLSError("TLS CA \(caFile) does not exist or cannot be read")
                }
                guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else {
                    throw TLSError.openSSL("TLS CA \(caFile) does not load")
                }
                if role == .server {
                    // The CA's name goes into the certificate request, so a client picks the right certificate.
                    if let names = SSL_load_client_CA_file(caFile) { SSL_CTX_set_client_CA_list(ctx, names) }
                }
            } else if role == .client || !clientCertificateRequired.isEmpty {
                throw TLSError("TLS needs the CA that signs the peer's certificates (--tls-ca)")
            }
            switch role {
            case .client:
                SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
                if !wire.isEmpty {
                    guard SSL_CTX_set_alpn_protos(ctx, wire, UInt32(wire.count)) == 0 else {
                        throw TLSError.openSSL("cannot offer ALPN protocols")
                    }
                }
            case .server:
                // Strict unless ALPN names a protocol that needs no client certificate (see `selectProtocol`).
                SSL_CTX_set_verify(
                    ctx, caFile == nil ? SSL_VERIFY_NONE : SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
            }
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
        certificate = info
        if role == .server, !wire.isEmpty {
            SSL_CTX_set_alpn_select_cb(
                ctx,
                { ssl, out, outLength, offered, offeredLength, argument in
                    let context = Unmanaged<TLSContext>.fromOpaque(argument!).takeUnretainedValue()
                    return context.selectProtocol(ssl!, out!, outLength!, offered!, offeredLength)
                }, Unmanaged.passUnretained(self).toOpaque())
        }
    }

    deinit { SSL_CTX_free(raw) }

    /// ALPN on the server: our most preferred protocol the client offers, and whether its clients must
    /// present a certificate (set here, before the server asks for one). None in common: the
    /// handshake fails with `no_application_protocol`.
    private func selectProtocol(
        _ ssl: OpaquePointer, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>,
        _ outLength: UnsafeMutablePointer<UInt8>,
        _ offered: UnsafePointer<UInt8>, _ offeredLength: UInt32
    ) -> Int32 {
        wireProtocols.withUnsafeBufferPointer { ours -> Int32 in
            guard let chosen = ctls_next_alpn(ours.baseAddress, UInt32(ours.count), offered, offeredLength, outLength)
            else {
                return SSL_TLSEXT_ERR_ALERT_FATAL
            }
            // `chosen` points into `ours`, which this context keeps alive.
            out.pointee = chosen
            let name = String(
                decoding: UnsafeBufferPointer(start: chosen, count: Int(outLength.pointee)), as: UTF8.self)
            if !clientCertificateRequired.contains(name) { SSL_set_verify(ssl, SSL_VERIFY_NONE, nil) }
            return SSL_TLSEXT_ERR_OK
        }
    }
}

/// What a certificate says about itself.
public struct CertificateInfo: Sendable, Equatable {
    /// The subject's distinguished name, one line (`CN=zoo,O=Menagerie`).
    public var subject: String
    /// The end of its validity.
    public var notAfter: Date?

    init(_ certificate: OpaquePointer) {
        var subject = ""
        if let name = X509_get_subject_name(certificate), let bio = BIO_new(BIO_s_mem()) {
            X509_NAME_print_ex(bio, name, 0, ctls_name_flags_rfc2253())
            subject = readAll(bio)
            BIO_free(bio)
        }
        self.subject = subject
        notAfter = nil
        if let time = X509_get0_notAfter(certificate) {
            var tm = tm()
            if ASN1_TIME_to_tm(time, &tm) == 1 { notAfter = Date(timeIntervalSince1970: TimeInterval(timegm(&tm))) }
        }
    }
}

/// Everything a memory BIO holds, as text.
private func readAll(_ bio: OpaquePointer) -> String {
    let count = Int(BIO_ctrl_pending(bio))
    guard count > 0 else { return "" }
    var bytes = [UInt8](repeating: 0, count: count)
    let read = BIO_read(bio, &bytes, Int32(count))
    return String(decoding: bytes.prefix(max(0, Int(read))), as: UTF8.self)
}

import CTLS
import Foundation

/// One TLS connection, driven through memory buffers: the caller moves ciphertext between these and
/// its socket (`feed`, `drainCiphertext`), so OpenSSL never touches a file descriptor and the event
/// loop stays the only one reading and writing sockets. Plaintext goes in by `write` and comes out
/// of `read`. Not thread-safe: one thread at a time (the transport holds a lock around it).
public final class TLSSession: @unchecked Sendable {
    private let ssl: OpaquePointer
    /// The BIO OpenSSL reads ciphertext from the peer from (bytes fed or lent) and writes ciphertext for
    /// the peer to (kept for `drainCiphertext`, or handed to a sink): `ctls_io` in CTLS. The SSL object owns it.
    private let io: OpaquePointer
    /// Where sealed records go when a sink is set (kept alive here; the BIO holds an unretained pointer).
    private var sink: CiphertextSink?
    /// Keeps the context (its ALPN list, which OpenSSL points into) alive as long as the session.
    public let context: TLSContext
    public private(set) var isHandshakeDone = false
    /// The protocol ALPN chose, once the handshake is done (nil: the peer offered none).
    public private(set) var negotiatedProtocol: String?

    /// A session of `context`'s role. A client names the server it expects (`serverName`: an IP
    /// address or a DNS name), which the server's certificate must carry; it is sent as SNI too.
    public init(context: TLSContext, serverName: String? = nil) throws(TLSError) {
        self.context = context
        ERR_clear_error()
        guard let ssl = SSL_new(context.raw) else { throw TLSError.openSSL("cannot make a TLS session") }
        guard let io = ctls_io_new() else {
            SSL_free(ssl)
            throw TLSError.openSSL("cannot make TLS buffers")
        }
        SSL_set_bio(ssl, io, io)  // one BIO both ways: SSL_set_bio takes one reference
        // Every stored property is set from here on: a throw runs `deinit`, which frees the session (and its BIO).
        self.ssl = ssl
        self.io = io
        switch context.role {
        case .server:
            SSL_set_accept_state(ssl)
        case .client:
            SSL_set_connect_state(ssl)
            if let serverName {
                let isAddress = serverName.contains(":") || serverName.allSatisfy { $0.isNumber || $0 == "." }
                let param = SSL_get0_param(ssl)
                let checked =
                    isAddress ? X509_VERIFY_PARAM_set1_ip_asc(param, serverName) : SSL_set1_host(ssl, serverName)
                if !isAddress { _ = ctls_set_sni(ssl, serverName) }
                guard checked == 1 else { throw TLSError.openSSL("cannot check the server's name \(serverName)") }
            }
        }
    }

    deinit { SSL_free(ssl) }

    /// What a step of the session came to.
    public enum Progress: Equatable {
        /// Waiting for more ciphertext from the peer (send what `pendingCiphertext` holds first).
        case wantsMore
        /// The handshake is complete.
        case established
        /// The peer closed the session cleanly (close_notify).
        case closed
    }

    /// Ciphertext arrived from the peer (copied: the bytes may go once this returns).
    public func feed(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        _ = ctls_io_feed(io, base.assumingMemoryBound(to: UInt8.self), bytes.count)
    }

    /// Ciphertext arrived from the peer, lent rather than copied: OpenSSL reads its records straight from
    /// `bytes` (one copy fewer than `feed`), which must stay valid and unchanged until `keepUnread()`.
    package func lend(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        ctls_io_lend(io, base.assumingMemoryBound(to: UInt8.self), bytes.count)
    }

    /// Ends `lend`: what OpenSSL has not read of the bytes yet (a record's start) is copied and kept.
    package func keepUnread() { _ = ctls_io_keep_unread(io) }

    /// From now on each record sealed for the peer goes to `sink` as OpenSSL writes it, during `write`,
    /// `handshake`, `read` (a key update's answer) or `shutdown` (one copy fewer than `drainCiphertext`).
    package func sendCiphertext(to sink: @escaping (UnsafeRawBufferPointer) -> Void) {
        let box = CiphertextSink(sink)
        self.sink = box
        ctls_io_set_sink(
            io,
            { context, bytes, count in
                guard let context else { return }
                Unmanaged<CiphertextSink>.fromOpaque(context).takeUnretainedValue().deliver(
                    UnsafeRawBufferPointer(start: bytes, count: count))
            }, Unmanaged.passUnretained(box).toOpaque())
    }

    /// Advances the handshake with what was fed; throws why it failed (our verification of the peer,
    /// or the peer's alert). Afterwards, ciphertext for the peer may wait in `pendingCiphertext`: an
    /// alert among it, which the caller sends before it closes.
    public func handshake() throws(TLSError) -> Progress {
        if isHandshakeDone { return .established }
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            isHandshakeDone = true
            var name: UnsafePointer<UInt8>?
            var length: UInt32 = 0
            SSL_get0_alpn_selected(ssl, &name, &length)
            if let name, length > 0 {
                negotiatedProtocol = String(
                    decoding: UnsafeBufferPointer(start: name, count: Int(length)), as: UTF8.self)
            }
            return .established
        }
        return try progress(after: result, doing: "TLS handshake")
    }

    /// Decrypts what was fed into `buffer`: the count of plaintext bytes (0 and `.wantsMore` or
    /// `.closed` when none).
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(TLSError) -> (count: Int, progress: Progress) {
        ERR_clear_error()
        var count = 0
        let result = SSL_read_ex(ssl, buffer.baseAddress, buffer.count, &count)
        if result == 1 { return (count, .established) }
        return (0, try progress(after: result, doing: "TLS"))
    }

    /// Encrypts `plaintext` whole (the ciphertext waits in `pendingCiphertext`).
    public func write(_ plaintext: UnsafeRawBufferPointer) throws(TLSError) {
        guard let base = plaintext.baseAddress, !plaintext.isEmpty else { return }
        ERR_clear_error()
        var written = 0
        let result = SSL_write_ex(ssl, base, plaintext.count, &written)
        guard result == 1 else {
            let state = try progress(after: result, doing: "TLS write")
            throw TLSError(
                state == .closed ? "TLS session closed by the peer" : "TLS write before the handshake is done")
        }
    }

    /// Queues a close_notify alert for the peer (a clean end of the session).
    public func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// Ciphertext waiting to be sent to the peer.
    public var pendingCiphertext: Int { Int(BIO_ctrl_wpending(io)) }

    /// Moves up to `buffer.count` bytes of ciphertext for the peer into `buffer`; returns how many.
    public func drainCiphertext(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return 0 }
        return ctls_io_drain(io, base.assumingMemoryBound(to: UInt8.self), buffer.count)
    }

    /// The certificate the peer presented, verified (nil when it presented none).
    public var peerCertificate: CertificateInfo? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        return CertificateInfo(certificate)
    }

    /// Turns a failed step into progress or an error that names the cause.
    private func progress(after result: Int32, doing what: String) throws(TLSError) -> Progress {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .wantsMore
        case SSL_ERROR_ZERO_RETURN:
            return .closed
        default:
            var reasons = TLSError.drainErrors()
            let verification = SSL_get_verify_result(ssl)
            if verification != X509_V_OK, let text = X509_verify_cert_error_string(verification) {
                let side = context.role == .server ? "the client's certificate" : "the server's certificate"
                reasons.insert("\(side) is refused: \(String(cString: text))", at: 0)
                reasons.removeAll { $0 == "certificate verify failed" }
            }
            throw TLSError(reasons.isEmpty ? "\(what) failed" : "\(what) failed: \(reasons.joined(separator: "; "))")
        }
    }
}

/// The closure the BIO's C callback reaches through an unretained pointer (the session keeps it).
private final class CiphertextSink {
    let deliver: (UnsafeRawBufferPointer) -> Void
    init(_ deliver: @escaping (UnsafeRawBufferPointer) -> Void) { self.deliver = deliver }
}

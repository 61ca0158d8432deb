import Base
import Foundation
import TCP
import TLS

/// A TLS connection: the `ByteStream` the protocols read and write, over the `TCPConnection` whose
/// reader it is. Ciphertext the socket reads is fed to the session (`TLSSession`, OpenSSL through
/// memory buffers) and the plaintext handed to this stream's own reader; plaintext sent here is
/// encrypted on the sending thread (a worker, usually) and the ciphertext queued on the socket, so
/// the loop does no encryption and the socket still batches, paces and lingers as for plaintext.
/// The same protocol readers, specialised for this type, and the same `ServerCallTable` serve it:
/// a plaintext connection pays nothing for TLS.
///
/// The session sits under a lock: workers write while the loop reads. Everything but `send` and
/// `unwrittenBytes` runs on the loop thread.
package final class TLSStream: ByteStream, ConnectionReader, @unchecked Sendable {
    /// What a TLS client of a plaintext-only server gets: a fatal `handshake_failure` alert (RFC 8446 §6) in a TLS 1.0
    /// record, which every TLS version reads before a handshake, so the client reports a failed handshake.
    package static let notServed: [UInt8] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28]

    package let socket: TCPConnection
    /// The protocol reading the plaintext, once the handshake is done and picked it.
    package var reader: (any ConnectionReader)?
    /// The handshake is done: gets the protocol ALPN chose (loop thread). The stream's reader is set
    /// here, or the connection closed.
    package var onEstablished: ((TLSStream, String?) -> Void)?
    private let sealed: Lock<Sealed>
    /// Whether the handshake is done (loop thread; `Sealed.established` for senders).
    package private(set) var isEstablished = false
    /// Plaintext of one record at a time (loop thread); TLS records hold at most 16 KiB.
    private lazy var plaintext = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 << 10, alignment: 16)
    /// The first bytes the peer sent, up to the length of a plaintext server's refusal, which a
    /// client recognises to say what happened (loop thread).
    private var firstBytes: [UInt8] = []
    private let role: TLSContext.Role

    /// The session and what senders share with the loop.
    private struct Sealed {
        let session: TLSSession
        var established = false
        /// Plaintext sent before the handshake was done, sent once it is.
        var early: [UInt8] = []
        /// A connection-level error was queued, or the session ended: nothing more is sent.
        var sealed = false
        /// Where a send puts its plaintext before it is encrypted.
        var scratch = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    }

    /// A session of `context` over `socket` (which it becomes the reader of); a client names the server
    /// it dialled (`serverName`), which the server's certificate must carry. A client starts the
    /// handshake with `start()`, a server with the first bytes it reads.
    package init(socket: TCPConnection, context: TLSContext, serverName: String? = nil) throws(TLSError) {
        self.socket = socket
        role = context.role
        let session = try TLSSession(context: context, serverName: serverName)
        // Each sealed record is copied once, by OpenSSL's write, straight into the socket's outbox (under the
        // session's lock, as every write to the session is).
        session.sendCiphertext { [weak socket] ciphertext in
            socket?.send(bytesOfSize: ciphertext.count, sealing: false) { $0.copyMemory(from: ciphertext) }
        }
        sealed = Lock(Sealed(session: session))
        socket.reader = self
    }

    deinit {
        sealed.withLock { $0.scratch.deallocate() }
        if isPlaintextAllocated { plaintext.deallocate() }
    }

    private var isPlaintextAllocated = false

    // MARK: ByteStream

    package var loop: EventLoop { socket.loop }
    package var peer: String { socket.peer }
    package var budget: MemoryBudget? { socket.budget }
    package var isClosed: Bool { socket.isClosed }
    package var isClosing: Bool { socket.isClosing }
    package var unwrittenBytes: Int { socket.unwrittenBytes }
    package var highWater: Int { socket.highWater }
    package var lowWater: Int { socket.lowWater }
    package var onDrain: (() -> Void)? {
        get { socket.onDrain }
        set { socket.onDrain = newValue }
    }

    package func pauseReading() { socket.pauseReading() }
    package func resumeReading() { socket.resumeReading() }

    /// Encrypts the `size` bytes `write` puts down and queues the ciphertext on the socket; any thread.
    package func send(bytesOfSize size: Int, sealing: Bool, _ write: (UnsafeMutableRawBufferPointer) -> Void) {
        let failure = sealed.withLock { state -> TLSError? in
            guard !state.sealed else { return nil }
            if state.scratch.count < size {
                state.scratch.deallocate()
                state.scratch = .allocate(byteCount: max(size, 16 << 10), alignment: 16)
            }
            let plaintext = UnsafeMutableRawBufferPointer(rebasing: state.scratch[..<size])
            write(plaintext)
            state.sealed = sealing
            defer {
                // A large message's buffer is not kept for the connection's life.
                if state.scratch.count > 1 << 20 {
                    state.scratch.deallocate()
                    state.scratch = UnsafeMutableRawBufferPointer(start: nil, count: 0)
                }
            }
            guard state.established else {
                state.early += plaintext
                return nil
            }
            do throws(TLSError) {
                try state.session.write(UnsafeRawBufferPointer(plaintext))
            } catch {
                state.sealed = true
                return error
            }
            queueCiphertext(of: state.session)
            return nil
        }
        if let failure { loop.execute { [self] in socket.close(reason: failure.message) } }
    }

    /// Moves what the session kept for the peer into the socket's outbox (under the session's lock); with the
    /// sink set in `init` it keeps nothing, so this is a check.
    private func queueCiphertext(of session: TLSSession) {
        let count = session.pendingCiphertext
        guard count > 0 else { return }
        socket.send(bytesOfSize: count, sealing: false) { destination in
            _ = session.drainCiphertext(into: destination)
        }
    }

    /// Ends the session cleanly (close_notify) once everything queued is written, and closes the
    /// socket as plaintext connections close (lingering).
    package func close(afterFlushing reason: String) {
        loop.assertInLoop()
        sealed.withLock { state in
            guard !state.sealed || state.established else { return }
            state.sealed = true
            if state.established {
                state.session.shutdown()
                queueCiphertext(of: state.session)
            }
        }
        socket.close(afterFlushing: reason)
    }

    package func close(reason: String) { socket.close(reason: reason) }

    // MARK: Reading the socket

    package var readsInBulk: Bool { reader?.readsInBulk ?? false }
    package var budgetedBytes: Int { reader?.budgetedBytes ?? 0 }
    package func releaseBudget() { reader?.releaseBudget() }

    /// A client begins the handshake (loop thread, once the socket is connected).
    package func start() {
        loop.assertInLoop()
        advanceHandshake()
    }

    package func received(_ bytes: UnsafeRawBufferPointer) {
        loop.assertInLoop()
        if firstBytes.count < TLSStream.notServed.count {
            firstBytes += bytes.prefix(TLSStream.notServed.count - firstBytes.count)
        }
        // OpenSSL reads the records straight from the socket's buffer while this runs; what is left of it (a
        // record's start) is kept when it ends.
        sealed.withLock { $0.session.lend(bytes) }
        defer { sealed.withLock { $0.session.keepUnread() } }
        if !isEstablished {
            advanceHandshake()
            guard isEstablished, !socket.isClosing, !socket.isClosed else { return }
        }
        decrypt()
    }

    private func advanceHandshake() {
        let outcome = sealed.withLock { state -> Result<TLSSession.Progress, TLSError> in
            let outcome = Result { () throws(TLSError) in try state.session.handshake() }
            // Our next handshake message, or the alert telling the peer why it failed.
            queueCiphertext(of: state.session)
            if case .success(.established) = outcome {
                state.established = true
                if !state.early.isEmpty {
                    let early = state.early
                    state.early = []
                    do {
                        try early.withUnsafeBytes { try state.session.write($0) }
                        queueCiphertext(of: state.session)
                    } catch {
                        return .failure(error as? TLSError ?? TLSError("\(error)"))
                    }
                }
            }
            return outcome
        }
        switch outcome {
        case .success(.established):
            isEstablished = true
            let chosen = sealed.withLock { $0.session.negotiatedProtocol }
            onEstablished?(self, chosen)
            onEstablished = nil
        case .success(.closed):
            socket.close(afterFlushing: "the peer ended the TLS handshake")
        case .success(.wantsMore):
            break
        case .failure(let error):
            sealed.withLock { $0.sealed = true }
            socket.close(afterFlushing: explain(error, handshake: true))
        }
    }

    /// Hands the plaintext of every complete record to the reader.
    private func decrypt() {
        if !isPlaintextAllocated {
            isPlaintextAllocated = true
            _ = plaintext
        }
        while !socket.isClosed, !socket.isClosing {
            let outcome = sealed.withLock { state -> Result<(count: Int, progress: TLSSession.Progress), TLSError> in
                let outcome = Result { () throws(TLSError) in try state.session.read(into: plaintext) }
                queueCiphertext(of: state.session)  // a key update's answer, or an alert
                return outcome
            }
            switch outcome {
            case .success(let (count, progress)):
                if count > 0 {
                    reader?.received(UnsafeRawBufferPointer(rebasing: plaintext[..<count]))
                } else if progress == .closed {
                    sealed.withLock { $0.sealed = true }
                    socket.close(reason: "peer closed the connection")
                    return
                } else {
                    return
                }
            case .failure(let error):
                sealed.withLock { $0.sealed = true }
                socket.close(afterFlushing: explain(error, handshake: false))
                return
            }
        }
    }

    /// What a failure means for the person reading the log or the client's error.
    private func explain(_ error: TLSError, handshake: Bool) -> String {
        if role == .client, firstBytes == TLSStream.notServed {
            return
                "\(peer) serves plaintext only and refused TLS (connect without TLS, or start the service with --tls-cert, --tls-key and --tls-ca)"
        }
        var message = error.message
        if message.contains(" alert ") {
            message +=
                role == .client
                ? " (the server refused this client's certificate or TLS settings)"
                : " (the client refused this server's certificate or TLS settings)"
        }
        return handshake ? message : message.replacingOccurrences(of: "TLS failed", with: "TLS session failed")
    }

    /// The certificate the peer presented (verified), for logs.
    package var peerCertificate: CertificateInfo? { sealed.withLock { $0.session.peerCertificate } }
}

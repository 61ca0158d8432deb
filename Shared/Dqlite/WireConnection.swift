import Synchronization
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// One TCP connection to one dqlite node, speaking protocol version 1 with blocking calls (a request, then its
/// response). Not thread-safe: a session owns it and one thread uses it at a time.
final class WireConnection {
    let address: String
    /// Where a call that went unanswered marks its node, so the client's other sessions on it stop being lent.
    let silence: SilentNodes?
    private var descriptor: Int32
    /// With TLS, the session this connection speaks through (driven here, on the blocking socket, rather than by a
    /// relay thread: a statement's round trip then crosses no thread besides the node's), and what it has opened and
    /// not yet been read.
    private var session: TLSSession?
    private var opened: [UInt8] = []
    private var openedStart = 0
    /// With TLS, where records read from the socket and the plaintext opened from them pass; `sealed` also carries
    /// what a flush sends (`feed` copies, so it is free again once fed). Made once per connection rather than per
    /// receive: a statement's round trip receives at least twice (the header, then the body).
    private let buffers: (sealed: UnsafeMutableRawBufferPointer, plaintext: UnsafeMutableRawBufferPointer)?
    /// Set once a call failed half-way: the stream's framing is lost and the connection must not be reused.
    private(set) var isBroken = false
    /// How long one send or receive may take (`setTimeout`).
    private var timeout: Duration
    /// A session's connection to the leader: while an answer is late, this process's own node is asked who leads,
    /// and the wait ends as soon as it names another node (the leader was cut off; see `LeaderWatch`).
    var leaderWatch: LeaderWatch?

    /// How a failed call ended, so that a caller can tell whether the node may have acted on the request.
    enum Failure: Error {
        /// Nothing was sent: the node did nothing.
        case notSent(String)
        /// The request (or part of it) was sent and no complete answer came: the node may have acted on it.
        case unanswered(String)
        /// The node answered FAILURE.
        case refused(code: UInt64, message: String)
        /// The answer cannot be read.
        case malformed(DqliteError)
    }

    /// Connects (within `timeout`) and sends the protocol version; every later send and receive gives up after
    /// `timeout` too.
    init(address: String, timeout: Duration, silence: SilentNodes? = nil, tls: ClusterTLS? = nil) throws(DqliteError) {
        self.address = address
        self.silence = silence
        self.timeout = timeout
        descriptor = try Self.connect(to: address, timeout: timeout)
        buffers = tls.map { _ in
            (
                UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 16),
                UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 16)
            )
        }
        if let tls {
            do throws(DqliteError) {
                let session: TLSSession
                do {
                    session = try TLSSession(context: tls.client, serverName: ClusterTLS.host(of: address))
                } catch {
                    throw DqliteError(.node, "cannot start TLS with \(address): \(error)")
                }
                try ClusterTLS.handshake(session, on: descriptor, until: .now + timeout, with: address)
                self.session = session
            } catch {
                close()  // not Glibc.close: deinit runs when an initializer throws, and would close the number again
                throw error
            }
        }
        setTimeout(timeout)
        var on: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        var handshake = WireEncoder()
        handshake.uint64(1)
        do {
            try sendAll(handshake.body)
        } catch {
            close()
            throw DqliteError(.noLeader, "dqlite node \(address) refused the handshake: \(error)")
        }
    }

    deinit {
        close()
        buffers?.sealed.deallocate()
        buffers?.plaintext.deallocate()
    }

    /// How long each later send and receive may take (a leader found quickly, then given a statement's time).
    func setTimeout(_ timeout: Duration) {
        self.timeout = timeout
        guard descriptor >= 0 else { return }
        var seconds = timeval(
            tv_sec: Int(timeout.components.seconds),
            tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
    }

    func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
        isBroken = true
    }

    /// Sends `request` and reads one response; FAILURE comes back as `.refused`.
    func call(_ request: [UInt8]) throws(Failure) -> WireDecoder {
        guard !isBroken else { throw .notSent("the connection to \(address) is closed") }
        do {
            try sendAll(request)
        } catch {
            close()
            silence?.mark(address)
            throw .unanswered("sending to \(address): \(error)")
        }
        return try receive()
    }

    /// Reads the next response (a call's, or a further part of a ROWS answer).
    func receive() throws(Failure) -> WireDecoder {
        let response: WireDecoder
        do {
            let header = try receiveAll(8)
            let words = header[0..<4].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            guard words <= 1 << 27 else { throw SocketError("a response of \(words) words") }  // 1 GiB
            response = WireDecoder(type: header[4], body: try receiveAll(Int(words) * wordSize))
        } catch {
            close()
            silence?.mark(address)
            throw .unanswered("receiving from \(address): \(error)")
        }
        guard response.type == WireType.failure else { return response }
        var failure = response
        let code: UInt64
        let message: String
        do {
            code = try failure.uint64()
            message = try failure.string()
        } catch {
            throw .malformed(error)
        }
        throw .refused(code: code, message: message)
    }

    private struct SocketError: Error, CustomStringConvertible {
        let message: String
        init(_ message: String) { self.message = message }
        var description: String { message }
    }

    private func sendAll(_ bytes: [UInt8]) throws(SocketError) {
        if let session, let buffers {
            let written = bytes.withUnsafeBytes { plaintext in
                Result { () throws(TLSError) in try session.write(plaintext) }
            }
            if case .failure(let error) = written { throw SocketError("TLS: \(error)") }
            guard ClusterTLS.flush(session, to: descriptor, through: buffers.sealed) else {
                throw SocketError(errno == EAGAIN ? "timed out" : String(cString: strerror(errno)))
            }
            return
        }
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                send(descriptor, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL))
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw SocketError(errno == EAGAIN ? "timed out" : String(cString: strerror(errno)))
            }
            sent += count
        }
    }

    private func receiveAll(_ count: Int) throws(SocketError) -> [UInt8] {
        if let session, let buffers { return try receiveOpened(count, from: session, through: buffers) }
        var bytes = [UInt8](repeating: 0, count: count)
        var received = 0
        while received < count {
            try awaitAnswer()
            let got = bytes.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress! + received, count - received, 0) }
            if got == 0 { throw SocketError("the node closed the connection") }
            if got < 0 {
                if errno == EINTR { continue }
                throw SocketError(errno == EAGAIN ? "timed out" : String(cString: strerror(errno)))
            }
            received += got
        }
        return bytes
    }

    /// `count` bytes of plaintext: what was opened before, then records read from the socket and opened.
    private func receiveOpened(
        _ count: Int, from session: TLSSession,
        through buffers: (sealed: UnsafeMutableRawBufferPointer, plaintext: UnsafeMutableRawBufferPointer)
    ) throws(SocketError) -> [UInt8] {
        let (sealed, plaintext) = buffers
        // Opens what was fed before reading more: records that came with the handshake's end, or with an
        // earlier answer, are already in the session and the socket will not signal them again.
        var fed = true
        while true {
            while fed {
                let read: (count: Int, progress: TLSSession.Progress)
                do {
                    read = try session.read(into: plaintext)
                } catch {
                    throw SocketError("TLS: \(error)")
                }
                if read.count > 0 {
                    if openedStart > 0 {
                        opened.removeFirst(openedStart)
                        openedStart = 0
                    }
                    opened += UnsafeRawBufferPointer(rebasing: plaintext[..<read.count])
                    continue
                }
                if read.progress == .closed { throw SocketError("the node closed the TLS session") }
                fed = false
            }
            _ = ClusterTLS.flush(session, to: descriptor, through: sealed)  // a key update's answer
            if opened.count - openedStart >= count { break }
            try awaitAnswer()
            let got = recv(descriptor, sealed.baseAddress!, sealed.count, 0)
            if got == 0 { throw SocketError("the node closed the connection") }
            if got < 0 {
                if errno == EINTR { continue }
                throw SocketError(errno == EAGAIN ? "timed out" : String(cString: strerror(errno)))
            }
            session.feed(UnsafeRawBufferPointer(rebasing: sealed[..<got]))
            fed = true
        }
        let bytes = Array(opened[openedStart..<openedStart + count])
        openedStart += count
        if openedStart == opened.count {
            opened.removeAll(keepingCapacity: true)
            openedStart = 0
        }
        return bytes
    }

    /// Waits for the socket to be readable, within the timeout, when a `leaderWatch` is set: in slices, asking the
    /// watch after each one whether this process's node names another leader, which ends the wait (as unanswered:
    /// the old leader may have acted on the request). Without a watch the receive's own timeout does the waiting.
    private func awaitAnswer() throws(SocketError) {
        guard let leaderWatch, descriptor >= 0 else { return }
        let giveUp = ContinuousClock.now + timeout
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        while true {
            let left = giveUp - .now
            guard left > .zero else { throw SocketError("timed out") }
            let slice = min(left, LeaderWatch.slice)
            let ready = poll(&poller, 1, max(1, Int32(clamping: Int(slice / .milliseconds(1)))))
            if ready != 0 { return }  // readable, closed or an error: the receive says which
            if let leader = leaderWatch.leader(), leader != address {
                throw SocketError("timed out: \(leaderWatch.address) names \(leader) the leader now")
            }
        }
    }

    /// A connected, blocking TCP socket to `host:port` (names resolved; IPv6 hosts in brackets).
    static func connect(to address: String, timeout: Duration) throws(DqliteError) -> Int32 {
        guard let colon = address.lastIndex(of: ":"), DqliteNode.isHostAndPort(address) else {
            throw DqliteError(.misuse, "a dqlite address must be host:port, not \"\(address)\"")
        }
        var host = String(address[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let port = String(address[address.index(after: colon)...])
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let code = getaddrinfo(host, port, &hints, &found)
        guard code == 0, let first = found else {
            throw DqliteError(.noLeader, "cannot resolve \(address): \(String(cString: gai_strerror(code)))")
        }
        defer { freeaddrinfo(found) }
        var reason = "no address"
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let info = candidate {
            candidate = info.pointee.ai_next
            let descriptor = socket(
                info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { continue }
            if connectWithin(timeout, descriptor, info.pointee.ai_addr, info.pointee.ai_addrlen, &reason) {
                return descriptor
            }
            Glibc.close(descriptor)
        }
        throw DqliteError(.noLeader, "cannot connect to dqlite node \(address): \(reason)")
    }

    /// A non-blocking connect waited for with poll, so a node that is down or cut off costs `timeout` at most.
    private static func connectWithin(
        _ timeout: Duration, _ descriptor: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t,
        _ reason: inout String
    ) -> Bool {
        let flags = fcntl(descriptor, F_GETFL)
        _ = fcntl(descriptor, F_SETFL, flags | O_NONBLOCK)
        defer { _ = fcntl(descriptor, F_SETFL, flags) }
        if Glibc.connect(descriptor, address, length) == 0 { return true }
        guard errno == EINPROGRESS else {
            reason = String(cString: strerror(errno))
            return false
        }
        var poller = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
        let milliseconds = Int32(clamping: Int(timeout / .milliseconds(1)))
        guard poll(&poller, 1, milliseconds) == 1 else {
            reason = "timed out"
            return false
        }
        var error: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &size)
        guard error == 0 else {
            reason = String(cString: strerror(error))
            return false
        }
        return true
    }
}

/// This process's own node, asked who leads while a statement waits on the leader for longer than `slice`. When
/// the leader is cut off from the others, they elect another within a few heartbeats and the own node (on the
/// majority's side) names it, while the statement would wait out the whole call timeout (3 s at 20 ms of latency,
/// against a client's deadline of the same order): the wait ends then and the statement goes to the new leader.
/// One connection, asked at most once per `slice` however many statements wait; a node that cannot be asked
/// names nobody (the statements wait as before).
final class LeaderWatch: Sendable {
    /// How long a statement waits before the node is asked, and how long an answer stands.
    static let slice = Duration.milliseconds(100)
    let address: String
    private let timeout: Duration
    private let tls: ClusterTLS?
    private let state = Mutex<State>(State())

    private struct State {
        var connection: WireConnection?
        var leader: String?
        var askedAt: ContinuousClock.Instant?
    }

    init(address: String, timeout: Duration, tls: ClusterTLS?) {
        self.address = address
        self.timeout = timeout
        self.tls = tls
    }

    /// The leader the node names (nil: none, or the node did not answer), at most `slice` old.
    func leader() -> String? {
        state.withLock { state in
            if let askedAt = state.askedAt, ContinuousClock.now - askedAt < Self.slice { return state.leader }
            state.askedAt = .now
            do throws(DqliteError) {
                if state.connection?.isBroken ?? true {
                    state.connection = try WireConnection(address: address, timeout: timeout, tls: tls)
                }
                let named = try DqliteClient.askLeader(state.connection!).address
                state.leader = named.isEmpty ? nil : named
            } catch {
                state.connection?.close()
                state.connection = nil
                state.leader = nil
            }
            return state.leader
        }
    }
}

/// The nodes of one client that did not answer the last time they were asked (a call timed out or broke, a
/// connect or leader question failed), until one answers again: the leader search asks them last, and sessions on
/// them count as broken, so a pool drops its idle sessions on a leader that was cut off instead of lending each
/// to wait out its own timeout.
final class SilentNodes: Sendable {
    private let addresses = Mutex<Set<String>>([])

    func mark(_ address: String) { _ = addresses.withLock { $0.insert(address) } }
    func clear(_ address: String) { _ = addresses.withLock { $0.remove(address) } }
    func contains(_ address: String) -> Bool { addresses.withLock { $0.contains(address) } }
    var all: Set<String> { addresses.withLock { $0 } }
}

import Foundation
import Synchronization
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// Mutual TLS for a dqlite cluster, which dqlite 1.11 does not have: Raft's traffic between nodes and clients'
/// statements to them go through TLS 1.3, each side presenting a certificate of the stack's CA.
///
/// dqlite lets us supply its sockets, not wrap them, so TLS sits beside it. A node with TLS listens privately, on
/// an abstract Unix socket that only its own process can reach; `Relay` listens on the node's public address,
/// completes the handshake (the peer's certificate checked against the CA), and carries the plaintext to the
/// node. Going out, Raft's connections (dqlite's connect function) and this process's `DqliteClient` dial through
/// `dial`, which finishes the handshake before it returns one end of a socket pair whose other end a relay thread
/// seals and opens, so a peer that is down or refuses our certificate fails the dial as an unreachable node would.
///
/// A relay thread per connection, blocking on both sockets: a cluster has few connections (Raft's to each peer and a
/// pool of sessions), and the thread keeps TLS entirely off dqlite's loop and the service's. Certificates are read
/// when the value is made; a node takes new ones when it restarts.
public final class ClusterTLS: Sendable {
    static let protocolName = "dqlite"
    let server: TLSContext
    let client: TLSContext
    /// The roles a peer's certificate must name (its subject's OU) for the relay to let it in, nil for any certificate
    /// of the CA: a member whose own certificate names a role (`member`, as compose issues them) admits only
    /// members and the operator (`gateway cluster …`). The stack's CA signs other certificates too — the gateway's,
    /// which every client of a TLS stack holds — and those opened every row of the cluster's databases.
    let admittedRoles: Set<String>?

    /// The role a member's certificate names.
    public static let memberRole = "member"
    /// The role of the operator's certificate (`gateway cluster` backup, restore, import, members).
    public static let operatorRole = "operator"

    /// - Parameters: the member's certificate and key (PEM, naming its address: peers check it) and the CA whose
    ///   certificates it accepts from peers and clients.
    public init(certificateFile: String, keyFile: String, caFile: String) throws(DqliteError) {
        do {
            server = try TLSContext(
                role: .server, certificateFile: certificateFile, keyFile: keyFile, caFile: caFile,
                protocols: [Self.protocolName],
                clientCertificateRequired: [Self.protocolName])
            client = try TLSContext(
                role: .client, certificateFile: certificateFile, keyFile: keyFile, caFile: caFile,
                protocols: [Self.protocolName])
        } catch {
            throw DqliteError(.misuse, "the cluster's TLS credentials do not load: \(error)")
        }
        admittedRoles =
            Self.roles(of: server.certificate?.subject ?? "").contains(Self.memberRole)
            ? [Self.memberRole, Self.operatorRole] : nil
    }

    /// The OU values of a one-line subject (`CN=health,OU=member,O=Menagerie`, RFC 2253; no escaped commas in ours).
    static func roles(of subject: String) -> Set<String> {
        Set(
            subject.split(separator: ",").compactMap { part in
                let pair = part.trimmingCharacters(in: .whitespaces)
                return pair.hasPrefix("OU=") ? String(pair.dropFirst(3)) : nil
            })
    }

    /// Whether the relay lets in a peer that presented `certificate` (verified against the CA by then).
    func admits(_ certificate: CertificateInfo?) -> Bool {
        guard let admittedRoles else { return true }
        guard let certificate else { return false }
        return !admittedRoles.isDisjoint(with: Self.roles(of: certificate.subject))
    }

    /// A connection to the node at `address` over TLS, handshake done within `timeout`: the returned descriptor is
    /// plaintext (one end of a socket pair), the caller's to close. Unreachable, or refusing us, is `.noLeader`.
    func dial(_ address: String, timeout: Duration) throws(DqliteError) -> Int32 {
        let deadline = ContinuousClock.now + timeout
        let sealed = try WireConnection.connect(to: address, timeout: timeout)
        do throws(DqliteError) {
            let session: TLSSession
            do {
                session = try TLSSession(context: client, serverName: Self.host(of: address))
            } catch {
                throw DqliteError(.node, "cannot start TLS with \(address): \(error)")
            }
            try Self.handshake(session, on: sealed, until: deadline, with: address)
            var pair: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
                throw DqliteError(
                    .node, "cannot make a socket pair for TLS to \(address): \(String(cString: strerror(errno)))")
            }
            Self.relay(plain: pair[1], sealed: sealed, session: session)
            return pair[0]
        } catch {
            Glibc.close(sealed)
            throw error
        }
    }

    /// Takes TLS connections on `publicAddress` (host:port) and carries each, once its handshake is done, to the
    /// node listening privately at `privateAddress` (`@name`: an abstract Unix socket). Stop it with `stop()`.
    func listen(on publicAddress: String, forwardingTo privateAddress: String) throws(DqliteError) -> Listener {
        try Listener(tls: self, address: publicAddress, node: privateAddress)
    }

    /// The host part of `host:port`, without an IPv6 address's brackets: the name the peer's certificate must carry.
    static func host(of address: String) -> String {
        guard let colon = address.lastIndex(of: ":") else { return address }
        var host = String(address[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host
    }

    // MARK: - Moving bytes

    /// Drives `session`'s handshake over the blocking socket `sealed` until it is done or `deadline` passes.
    static func handshake(
        _ session: TLSSession, on sealed: Int32, until deadline: ContinuousClock.Instant, with peer: String
    ) throws(DqliteError) {
        // For records both ways: `feed` copies what it is given.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16_384, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let progress: TLSSession.Progress
            do {
                progress = try session.handshake()
            } catch {
                _ = flush(session, to: sealed, through: buffer)  // the alert, so the peer learns why
                throw DqliteError(.noLeader, "TLS with dqlite node \(peer) failed: \(error)")
            }
            guard flush(session, to: sealed, through: buffer) else {
                throw DqliteError(.noLeader, "dqlite node \(peer) closed the TLS handshake")
            }
            switch progress {
            case .established: return
            case .closed: throw DqliteError(.noLeader, "dqlite node \(peer) closed the TLS handshake")
            case .wantsMore: break
            }
            let left = deadline - ContinuousClock.now
            var poller = pollfd(fd: sealed, events: Int16(POLLIN), revents: 0)
            guard left > .zero, poll(&poller, 1, Int32(clamping: max(1, Int(left / .milliseconds(1))))) == 1 else {
                throw DqliteError(.noLeader, "TLS handshake with dqlite node \(peer) timed out")
            }
            let count = Glibc.read(sealed, buffer.baseAddress, buffer.count)
            guard count > 0 else {
                throw DqliteError(.noLeader, "dqlite node \(peer) closed the connection during the TLS handshake")
            }
            session.feed(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
    }

    /// Sends what `session` has sealed for the peer, a `scratch`-full at a time; false when the socket failed. The
    /// caller lends `scratch` (its connection's, kept for it) so that a flush, one per write, allocates nothing.
    static func flush(_ session: TLSSession, to sealed: Int32, through scratch: UnsafeMutableRawBufferPointer) -> Bool {
        while session.pendingCiphertext > 0 {
            let count = session.drainCiphertext(into: scratch)
            guard count > 0 else { break }
            guard writeAll(sealed, UnsafeRawBufferPointer(rebasing: scratch[..<count])) else { return false }
        }
        return true
    }

    /// Writes all of `bytes` to the blocking descriptor; false when it fails (the peer gone, a send timeout).
    static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = send(descriptor, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    /// Starts the thread that carries bytes between `plain` (the node's or our client's side) and `sealed` (the
    /// peer's, TLS) until either side closes; then it closes both. A send to the peer that waits longer than
    /// `stallLimit` gives up: a peer cut off must not hold the thread (and the node's connection) for the kernel's
    /// retransmission timeout.
    static func relay(plain: Int32, sealed: Int32, session: TLSSession) {
        var limit = timeval(tv_sec: Int(stallLimit.components.seconds), tv_usec: 0)
        setsockopt(sealed, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var on: Int32 = 1
        setsockopt(sealed, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        let thread = Thread {
            pump(plain: plain, sealed: sealed, session: session)
            Glibc.close(plain)
            Glibc.close(sealed)
        }
        thread.name = "dqlite-tls"
        thread.stackSize = 256 << 10
        thread.start()
    }

    static let stallLimit: Duration = .seconds(10)

    private static func pump(plain: Int32, sealed: Int32, session: TLSSession) {
        let inbound = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 16)
        let opened = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 16)
        let outbound = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 16)
        defer {
            inbound.deallocate()
            opened.deallocate()
            outbound.deallocate()
        }
        /// Hands `plain` what the session can open of what it was fed; false when the session or `plain` ended.
        func deliverOpened() -> Bool {
            while true {
                guard let (count, progress) = try? session.read(into: opened) else {
                    _ = flush(session, to: sealed, through: outbound)  // the alert
                    return false
                }
                if count > 0 {
                    guard writeAll(plain, UnsafeRawBufferPointer(rebasing: opened[..<count])) else { return false }
                    continue
                }
                return progress != .closed
            }
        }
        // The peer's first records may have come with the end of its handshake and been fed already: the socket
        // will not signal them again (seen: a request sent right after the handshake waited until the timeout).
        guard deliverOpened() else { return }
        var sockets = [
            pollfd(fd: plain, events: Int16(POLLIN), revents: 0), pollfd(fd: sealed, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&sockets, 2, -1)
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { return }
            if sockets[0].revents != 0 {
                let count = Glibc.read(plain, inbound.baseAddress, inbound.count)
                guard count > 0 else {
                    session.shutdown()
                    _ = flush(session, to: sealed, through: outbound)
                    return
                }
                guard (try? session.write(UnsafeRawBufferPointer(rebasing: inbound[..<count]))) != nil,
                    flush(session, to: sealed, through: outbound)
                else { return }
            }
            if sockets[1].revents != 0 {
                let count = Glibc.read(sealed, inbound.baseAddress, inbound.count)
                guard count > 0 else { return }
                session.feed(UnsafeRawBufferPointer(rebasing: inbound[..<count]))
                // and a key update's answer
                guard deliverOpened(), flush(session, to: sealed, through: outbound) else { return }
            }
        }
    }

    // MARK: - The listening side

    /// The relay's listening socket on the node's public address and the thread that accepts on it.
    final class Listener: Sendable {
        let address: String
        private let descriptor: Int32
        /// Written to (then closed) by `stop` to wake the accepting thread, which then closes the listening socket and
        /// the read end.
        private let wake: (read: Int32, write: Int32)
        private let stopped = Atomic<Bool>(false)

        fileprivate init(tls: ClusterTLS, address: String, node: String) throws(DqliteError) {
            self.address = address
            descriptor = try Self.bind(address)
            var pipeEnds: [Int32] = [-1, -1]
            guard pipe(&pipeEnds) == 0 else {
                Glibc.close(descriptor)
                throw DqliteError(.node, "cannot make a pipe: \(String(cString: strerror(errno)))")
            }
            for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            wake = (pipeEnds[0], pipeEnds[1])
            let listening = descriptor
            let wakeUp = wake.read
            let thread = Thread { Self.accept(listening, wakeUp: wakeUp, tls: tls, node: node) }
            thread.name = "dqlite-tls-accept"
            thread.stackSize = 256 << 10
            thread.start()
        }

        /// Stops taking connections (those relayed already go on until the node or the peer closes them).
        func stop() {
            guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
            var byte: UInt8 = 1
            _ = Glibc.write(wake.write, &byte, 1)
            // Nothing writes to it again: left open, every node started and stopped over TLS lost a descriptor.
            Glibc.close(wake.write)
        }

        deinit { stop() }

        private static func accept(_ listening: Int32, wakeUp: Int32, tls: ClusterTLS, node: String) {
            defer {
                Glibc.close(listening)
                Glibc.close(wakeUp)
            }
            var sockets = [
                pollfd(fd: listening, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wakeUp, events: Int16(POLLIN), revents: 0),
            ]
            while true {
                let ready = poll(&sockets, 2, -1)
                if ready < 0, errno == EINTR { continue }
                guard ready > 0, sockets[1].revents == 0 else { return }
                let peer = Glibc.accept(listening, nil, nil)
                guard peer >= 0 else { continue }
                _ = fcntl(peer, F_SETFD, FD_CLOEXEC)
                let thread = Thread { serve(peer, tls: tls, node: node) }
                thread.name = "dqlite-tls"
                thread.stackSize = 256 << 10
                thread.start()
            }
        }

        /// One accepted connection: the handshake within `handshakeLimit` (a peer that never finishes it must not
        /// keep a thread), then the node's private socket, then the relay.
        private static func serve(_ peer: Int32, tls: ClusterTLS, node: String) {
            var limit = timeval(tv_sec: Int(handshakeLimit.components.seconds), tv_usec: 0)
            setsockopt(peer, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            guard let session = try? TLSSession(context: tls.server),
                (try? handshake(session, on: peer, until: .now + handshakeLimit, with: "client")) != nil,
                tls.admits(session.peerCertificate),
                let local = connectPrivately(node)
            else {
                Glibc.close(peer)
                return
            }
            ClusterTLS.relay(plain: local, sealed: peer, session: session)
        }

        static let handshakeLimit: Duration = .seconds(5)

        /// A connection to the abstract Unix socket `@name` of this process's node.
        private static func connectPrivately(_ address: String) -> Int32? {
            let name = Array(address.utf8.dropFirst())
            var socketAddress = sockaddr_un()
            socketAddress.sun_family = sa_family_t(AF_UNIX)
            guard name.count < MemoryLayout.size(ofValue: socketAddress.sun_path) else { return nil }
            withUnsafeMutableBytes(of: &socketAddress.sun_path) { path in
                path[0] = 0
                for (index, byte) in name.enumerated() { path[index + 1] = byte }
            }
            let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + name.count)
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { return nil }
            let connected = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, length) == 0 }
            }
            guard connected else {
                Glibc.close(descriptor)
                return nil
            }
            return descriptor
        }

        /// A listening TCP socket on `host:port`.
        private static func bind(_ address: String) throws(DqliteError) -> Int32 {
            guard let colon = address.lastIndex(of: ":"), DqliteNode.isHostAndPort(address) else {
                throw DqliteError(.misuse, "a dqlite address must be host:port, not \"\(address)\"")
            }
            let host = ClusterTLS.host(of: address)
            let port = String(address[address.index(after: colon)...])
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            hints.ai_flags = AI_PASSIVE
            var found: UnsafeMutablePointer<addrinfo>?
            let code = getaddrinfo(host, port, &hints, &found)
            guard code == 0, let info = found else {
                throw DqliteError(.node, "cannot resolve \(address): \(String(cString: gai_strerror(code)))")
            }
            defer { freeaddrinfo(found) }
            let descriptor = socket(
                info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else {
                throw DqliteError(.node, "cannot make a socket: \(String(cString: strerror(errno)))")
            }
            var on: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
            guard Glibc.bind(descriptor, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0,
                Glibc.listen(descriptor, 128) == 0
            else {
                let reason = String(cString: strerror(errno))
                Glibc.close(descriptor)
                throw DqliteError(.node, "cannot listen on \(address) for the cluster's TLS: \(reason)")
            }
            return descriptor
        }
    }
}

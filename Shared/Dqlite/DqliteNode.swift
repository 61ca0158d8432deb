import CDqlite
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One dqlite node: a Raft member that keeps a replica of the cluster's SQLite databases and answers clients
/// on its address. dqlite runs it on a thread of its own (its own libuv loop), started by `start()`; this
/// process reaches it, like any other client, through `DqliteClient` over the network.
///
/// The node with id 1 bootstraps a new cluster on its first start; every other node starts empty and is added
/// by the leader (`DqliteClient.join`). A restarted node must keep its id and its data directory.
/// The databases live in memory on every node; the data directory holds the Raft log and snapshots.
public final class DqliteNode: Sendable {
    public let id: UInt64
    /// Where clients and the other nodes reach this node (`host:port`).
    public let address: String
    public let dataDirectory: String
    private let state: Mutex<State>

    private enum State { case created, running(ClusterTLS.Listener?), stopped }
    /// With TLS: how Raft reaches the peers (dqlite's connect function gets an unretained pointer to it), and what
    /// the relay listens on in front of the node's private socket.
    private let raftDialer: RaftDialer?
    private let tlsAddresses: (public: String, private: String)?
    /// The `dqlite_node *`, owned by this object; only `start`/`stop`/`deinit` touch it, under `state`'s lock.
    private nonisolated(unsafe) let node: OpaquePointer

    /// - Parameters:
    ///   - address: `host:port` the others dial; also where it listens unless `bindAddress` says otherwise.
    ///   - dataDirectory: created when missing.
    ///   - networkLatency: the one-way latency dqlite derives its heartbeat and election timeouts from
    ///     (dqlite's default when nil); a small value on loopback makes failover take tens of milliseconds.
    ///   - tls: Raft and clients over mutual TLS (`ClusterTLS`): the node then listens on a private socket of this
    ///     process, and a relay takes TLS on `bindAddress ?? address`.
    public init(
        id: UInt64, address: String, dataDirectory: String, bindAddress: String? = nil, networkLatency: Duration? = nil,
        tls: ClusterTLS? = nil
    ) throws(DqliteError) {
        guard id > 0 else { throw DqliteError(.misuse, "a dqlite node id must be positive") }
        guard Self.isHostAndPort(address), bindAddress.map(Self.isHostAndPort) ?? true else {
            throw DqliteError(.misuse, "a dqlite address must be host:port, not \"\(bindAddress ?? address)\"")
        }
        // dqlite's libuv loop writes to its peers' sockets with plain write(): when a peer has gone, the kernel
        // raises SIGPIPE, whose default action ends this whole process (measured: the test process died with
        // signal 13 once a node of its cluster stopped). The failed write's EPIPE is all dqlite needs.
        signal(SIGPIPE, SIG_IGN)
        try Self.createDirectory(dataDirectory)
        var created: OpaquePointer?
        let code = dqlite_node_create(dqlite_node_id(id), address, dataDirectory, &created)
        guard code == 0, let created else {
            let reason = created.map { String(cString: dqlite_node_errmsg($0)) } ?? "code \(code)"
            if let created { dqlite_node_destroy(created) }
            throw DqliteError(.node, "cannot create dqlite node \(id) at \(address): \(reason)")
        }
        node = created
        self.id = id
        self.address = address
        self.dataDirectory = dataDirectory
        state = Mutex(.created)
        if let tls {
            let dialer = RaftDialer(tls: tls, timeout: DqliteClient.timeouts(networkLatency: networkLatency).discovery)
            raftDialer = dialer
            tlsAddresses = (
                bindAddress ?? address, "@menagerie-dqlite-\(getpid())-\(id)-\(UInt32.random(in: 0...UInt32.max))"
            )
        } else {
            raftDialer = nil
            tlsAddresses = nil
        }
        // From here on a throw runs `deinit` (every stored property is set), which destroys the node: destroying it
        // here as well freed it twice (glibc aborted ocr when its cluster port was taken).
        let listenAddress = tlsAddresses?.private ?? bindAddress ?? address
        guard dqlite_node_set_bind_address(node, listenAddress) == 0 else {
            // dqlite binds here and closes the socket on failure; close(2) leaves the bind's errno as it was.
            let reason = String(cString: strerror(errno))
            throw DqliteError(.node, "dqlite node \(id) cannot listen on \(listenAddress): \(reason)")
        }
        if let raftDialer {
            try check(
                dqlite_node_set_connect_func(node, dialThroughTLS, Unmanaged.passUnretained(raftDialer).toOpaque()),
                "set its connect function")
        }
        if let networkLatency {
            let milliseconds = max(1, Int(networkLatency / .milliseconds(1)))
            try check(dqlite_node_set_network_latency_ms(node, UInt32(min(milliseconds, 3_600_000))), "set its latency")
        }
    }

    deinit {
        state.withLock { state in
            if case .running(let listener) = state {
                listener?.stop()
                _ = dqlite_node_stop(node)
            }
        }
        dqlite_node_destroy(node)
    }

    /// Starts the node's thread; on return it accepts connections. A node starts once.
    public func start() throws(DqliteError) {
        try state.withLock { (state) throws(DqliteError) in
            guard case .created = state else { throw DqliteError(.misuse, "dqlite node \(id) was started before") }
            try check(dqlite_node_start(node), "start")
            var listener: ClusterTLS.Listener?
            if let raftDialer, let tlsAddresses {
                do throws(DqliteError) {
                    listener = try raftDialer.tls.listen(on: tlsAddresses.public, forwardingTo: tlsAddresses.private)
                } catch {
                    _ = dqlite_node_stop(node)
                    state = .stopped
                    throw error
                }
            }
            state = .running(listener)
        }
    }

    /// Stops accepting clients, lets requests in flight finish, and joins the node's thread. Idempotent.
    public func stop() throws(DqliteError) {
        try state.withLock { (state) throws(DqliteError) in
            guard case .running(let listener) = state else { return }
            state = .stopped
            listener?.stop()
            try check(dqlite_node_stop(node), "stop")
        }
    }

    private func check(_ code: Int32, _ what: String) throws(DqliteError) {
        guard code == 0 else {
            throw DqliteError(
                .node,
                "dqlite node \(id) could not \(what): \(String(cString: dqlite_node_errmsg(node))) (code \(code))")
        }
    }

    /// Creates `path` and its missing parents (as `mkdir -p`).
    private static func createDirectory(_ path: String) throws(DqliteError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw DqliteError(
                    .node, "cannot create the data directory \(path): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// `host:port` with a port in 1...65535 (IPv6 hosts in brackets).
    static func isHostAndPort(_ address: String) -> Bool {
        guard let colon = address.lastIndex(of: ":"), colon != address.startIndex,
            let port = Int(address[address.index(after: colon)...]), (1...65535).contains(port)
        else { return false }
        return true
    }
}

/// What dqlite's connect function needs to reach a peer through TLS; the node keeps it alive.
private final class RaftDialer: Sendable {
    let tls: ClusterTLS
    let timeout: Duration

    init(tls: ClusterTLS, timeout: Duration) {
        self.tls = tls
        self.timeout = timeout
    }
}

/// dqlite's connect function for a node with TLS: runs on libuv's thread pool (it may block), returns a plaintext
/// descriptor whose bytes a relay seals for the peer at `address`.
private func dialThroughTLS(
    _ context: UnsafeMutableRawPointer?, _ address: UnsafePointer<CChar>?, _ descriptor: UnsafeMutablePointer<Int32>?
) -> Int32 {
    guard let context, let address, let descriptor else { return 1 }
    let dialer = Unmanaged<RaftDialer>.fromOpaque(context).takeUnretainedValue()
    guard let connected = try? dialer.tls.dial(String(cString: address), timeout: dialer.timeout) else { return 1 }
    descriptor.pointee = connected
    return 0
}

import ArgumentParser
import Base
import Foundation
import Jobs
import RPC
import Transport

/// The flags every service executable takes: where to listen, where its data lives, how much it
/// logs, and the runtime's limits.
public struct ServiceOptions: ParsableArguments, Sendable {
    @Option(help: "Address to listen on (numeric IPv4 or IPv6).")
    public var host = "127.0.0.1"

    @Option(help: "TCP port to listen on; 0 picks a free one (the log says which).")
    public var port = 0

    @Option(name: .customLong("data-dir"), help: "Directory for the service's database and files (created if missing).")
    public var dataDirectory = "data"

    @Option(
        name: .customLong("database"),
        help: "The service's SQLite file, which replicas may share (default: DATA_DIR/SERVICE.sqlite, e.g. zoo.sqlite)."
    )
    public var database: String?

    @Option(
        name: .customLong("cluster"),
        help:
            "Replicate the service's database with dqlite instead of the SQLite file: the addresses (host:port) of the cluster's nodes, comma-separated, in the same order on every replica (the first bootstraps the cluster). Needs --cluster-bind."
    )
    public var cluster: String?

    @Option(
        name: .customLong("cluster-bind"),
        help:
            "This replica's dqlite node: its address (host:port), one of --cluster, where it listens and the other nodes reach it."
    )
    public var clusterBind: String?

    @Option(
        name: .customLong("cluster-listen"),
        help:
            "Where the dqlite node listens (host:port) when that is not --cluster-bind: 0.0.0.0:PORT in a container whose name other nodes resolve to it (default: --cluster-bind)."
    )
    public var clusterListen: String?

    @Option(
        name: .customLong("cluster-id"),
        help:
            "This replica's dqlite node id, kept for the life of its data (default: its place in --cluster, counting from 1). Id 1 bootstraps the cluster. Give it when the list changes as nodes come and go, so a node keeps its id."
    )
    public var clusterID: UInt64?

    @Option(
        name: .customLong("cluster-dir"),
        help:
            "The dqlite node's Raft log and snapshots (default: DATA_DIR/dqlite); keep it across restarts. The database itself lives in memory on every node."
    )
    public var clusterDirectory: String?

    @Option(
        name: .customLong("cluster-latency"),
        help:
            "The network's one-way latency between the dqlite nodes, in milliseconds, from which dqlite derives its heartbeat and election timeouts (default: dqlite's own, a failover of several seconds); smaller fails over faster and elects spuriously on a loaded host."
    )
    public var clusterLatency: Int?

    @Option(
        name: .customLong("cluster-tls-cert"),
        help:
            "The dqlite member's certificate (PEM, naming its address and OU=member) for the cluster's mutual TLS, apart from the service's own TLS (default: --tls-cert). Members naming their role admit only members and the operator."
    )
    public var clusterTLSCertificate: String?

    @Option(name: .customLong("cluster-tls-key"), help: "The private key of --cluster-tls-cert (PEM).")
    public var clusterTLSKey: String?

    @Option(name: .customLong("cluster-tls-ca"), help: "The CA of the cluster's members and operator (PEM).")
    public var clusterTLSCA: String?

    @Option(
        name: .customLong("identity"),
        help:
            "The stack's users and tokens, an SQLite file every service shares (default: $MENAGERIE_IDENTITY, else DATA_DIR/identity.sqlite)."
    )
    public var identity: String?

    @Option(
        name: .customLong("admin-token-file"),
        help:
            "A file holding the admin token (default: $MENAGERIE_ADMIN_TOKEN_FILE; $MENAGERIE_ADMIN_TOKEN gives the token itself)."
    )
    public var adminTokenFile: String?

    @Option(name: .customLong("log-level"), help: "debug, info, warning or error.")
    public var logLevel = "info"

    @Option(
        name: .customLong("log-format"),
        help: "text (for people), logfmt or json (one JSON object a line), for log pipelines.")
    public var logFormat = "text"

    @Option(name: .customLong("max-frame-size"), help: "Largest frame a client may send, in bytes.")
    public var maxFrameSize = FrameCodec.defaultMaxFrameSize

    @Option(
        name: .customLong("max-connections"),
        help:
            "Connections served at once; beyond it the longest-idle connection is closed to make room, or the newcomer refused when every connection has a call open."
    )
    public var maxConnections = 1024

    @Option(
        name: .customLong("max-connections-per-peer"),
        help: "Connections from one client address served at once (same rule as --max-connections).")
    public var maxConnectionsPerPeer = 256

    @Option(
        name: .customLong("max-concurrent-calls"),
        help: "Calls one connection may have open at once; more are answered RESOURCE_EXHAUSTED.")
    public var maxConcurrentCalls = 100

    @Option(
        name: .customLong("memory-budget"),
        help:
            "MiB the server may hold for large frames still arriving and answers clients have not read; beyond it large frames are refused (RESOURCE_EXHAUSTED) and the connections holding the most are closed."
    )
    public var memoryBudget = 256

    @Option(
        name: .customLong("workers"),
        help: "Handlers that run at once (default: one per core; calls measured at 5 ms or more run on all but one).")
    public var workers = ProcessInfo.processInfo.activeProcessorCount

    @Option(
        name: .customLong("loops"),
        help:
            "Event loops doing socket I/O, connections spread over them (default: one per core; 1 serves every connection on one loop thread)."
    )
    public var loops = ProcessInfo.processInfo.activeProcessorCount

    @Option(
        name: .customLong("lane-threads"),
        help: "Threads of the heavy-work lane (blocking and CPU-bound work, jobs; default: one per core).")
    public var laneThreads = ProcessInfo.processInfo.activeProcessorCount

    @Option(
        name: .customLong("lane-queue"),
        help: "Work items that may wait for a lane thread; more are refused with RESOURCE_EXHAUSTED.")
    public var laneQueue = 64

    @Option(
        name: .customLong("job-threads"),
        help:
            "Jobs (trainings, imports, batch scans) that run at once, on threads of their own apart from the lane (default: half the cores, at least one)."
    )
    public var jobThreads = JobLimits().threads

    @Option(
        name: .customLong("max-jobs"), help: "Jobs queued or running at once; more are refused with RESOURCE_EXHAUSTED."
    )
    public var maxJobs = JobLimits().maxActive

    @Option(
        name: .customLong("max-jobs-per-user"),
        help: "Jobs queued or running at once for one user (or client address, for calls without a user).")
    public var maxJobsPerUser = JobLimits().maxActivePerSubmitter

    @Option(
        name: .customLong("upload-idle-timeout"),
        help:
            "Seconds an upload (a client stream) may go without a message before it ends DEADLINE_EXCEEDED, its data discarded."
    )
    public var uploadIdleTimeout = 30.0

    @Option(
        name: .customLong("upload-min-rate"),
        help: "Bytes per second an upload must average over each minute, or it ends DEADLINE_EXCEEDED (0: no minimum).")
    public var uploadMinRate = 1024

    @Option(
        name: .customLong("max-uploads"),
        help: "Uploads open at once on the replica; more are refused with RESOURCE_EXHAUSTED.")
    public var maxUploads = 256

    @Option(name: .customLong("max-uploads-per-peer"), help: "Uploads open at once from one client address.")
    public var maxUploadsPerPeer = 64

    @Option(name: .customLong("idle-timeout"), help: "Seconds an idle connection is kept open.")
    public var idleTimeout = 300.0

    @Option(
        name: .customLong("frame-timeout"),
        help: "Seconds a client has to finish a frame it started (and its first one).")
    public var frameTimeout = 10.0

    @Option(name: .customLong("shutdown-grace"), help: "Seconds calls in flight get to finish on SIGTERM/SIGINT.")
    public var shutdownGrace = 10.0

    @Option(
        name: .customLong("tls-cert"),
        help:
            "The service's TLS certificate (PEM): it then serves TLS only, mutual TLS on the binary protocol. Reloaded on SIGHUP."
    )
    public var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: "The private key of --tls-cert (PEM).")
    public var tlsKey: String?

    @Option(
        name: .customLong("tls-ca"),
        help: "The CA whose client certificates the binary protocol accepts (PEM; compose up --tls makes one).")
    public var tlsCA: String?

    @Flag(
        name: .customLong("insecure"),
        help: "Serve plaintext on a non-loopback --host (refused otherwise: use TLS there).")
    public var insecure = false

    public init() {}

    /// The `--cluster` list, split and trimmed (nil without the flag).
    public var clusterAddresses: [String]? {
        cluster.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    private func validateCluster() throws {
        guard let addresses = clusterAddresses else {
            guard clusterBind == nil, clusterListen == nil, clusterDirectory == nil, clusterLatency == nil,
                clusterID == nil
            else {
                throw ValidationError(
                    "--cluster-bind, --cluster-listen, --cluster-id, --cluster-dir and --cluster-latency need --cluster (the addresses of the cluster's nodes)"
                )
            }
            return
        }
        for address in addresses {
            guard let colon = address.lastIndex(of: ":"), colon != address.startIndex,
                let port = Int(address[address.index(after: colon)...]), (1...65535).contains(port)
            else {
                throw ValidationError("--cluster takes host:port addresses separated by commas (got \"\(address)\")")
            }
        }
        guard Set(addresses).count == addresses.count else { throw ValidationError("--cluster names an address twice") }
        guard let clusterBind else {
            throw ValidationError("--cluster needs --cluster-bind: which of its addresses is this replica's node")
        }
        guard addresses.contains(clusterBind) else {
            throw ValidationError(
                "--cluster-bind \(clusterBind) is not one of --cluster's addresses (\(addresses.joined(separator: ",")))"
            )
        }
        if let clusterListen {
            let parts = clusterListen.split(separator: ":")
            guard parts.count >= 2, let port = Int(parts.last!), (1...65535).contains(port) else {
                throw ValidationError("--cluster-listen takes host:port (got \"\(clusterListen)\")")
            }
        }
        guard database == nil else {
            throw ValidationError("--database (an SQLite file) and --cluster (a dqlite cluster) exclude each other")
        }
        if clusterID == 0 { throw ValidationError("--cluster-id must be a positive number") }
        if let clusterLatency, !(1...10_000).contains(clusterLatency) {
            throw ValidationError("--cluster-latency must be 1-10000 milliseconds (got \(clusterLatency))")
        }
    }

    /// Whether `host` is a loopback address, where plaintext stays available for development.
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// The TLS credentials the flags name, loaded (nil: plaintext).
    public func tlsCredentials() throws -> TLSCredentials? {
        guard let tlsCertificate, let tlsKey, let tlsCA else { return nil }
        return try TLSCredentials.server(certificateFile: tlsCertificate, keyFile: tlsKey, caFile: tlsCA)
    }

    /// The cluster's mutual TLS: its own credentials (`--cluster-tls-*`), else the service's (`--tls-*`), else none.
    public func clusterTLSCredentials() throws -> TLSCredentials? {
        guard let clusterTLSCertificate, let clusterTLSKey, let clusterTLSCA else { return try tlsCredentials() }
        return try TLSCredentials.server(
            certificateFile: clusterTLSCertificate, keyFile: clusterTLSKey, caFile: clusterTLSCA)
    }

    public func validate() throws {
        guard LogLevel(name: logLevel) != nil else {
            throw ValidationError("--log-level must be one of debug, info, warning, error (got \(logLevel))")
        }
        guard LogFormat(name: logFormat) != nil else {
            throw ValidationError("--log-format must be one of text, logfmt, json (got \(logFormat))")
        }
        if let database, database.isEmpty || database.utf8.contains(0) {
            throw ValidationError("--database must be a file path (got \"\(database)\")")
        }
        try validateCluster()
        let clusterTLSFlags = [clusterTLSCertificate, clusterTLSKey, clusterTLSCA].compactMap { $0 }.count
        guard clusterTLSFlags == 0 || clusterTLSFlags == 3 else {
            throw ValidationError("--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together")
        }
        guard clusterTLSFlags == 0 || cluster != nil else {
            throw ValidationError("--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca need --cluster")
        }
        let tlsFlags = [tlsCertificate, tlsKey, tlsCA].compactMap { $0 }.count
        guard tlsFlags == 0 || tlsFlags == 3 else {
            throw ValidationError(
                "--tls-cert, --tls-key and --tls-ca go together (TLS needs the certificate, its key and the CA of clients)"
            )
        }
        if tlsFlags == 0, !insecure, !Self.isLoopback(host) {
            throw ValidationError(
                "refusing to serve plaintext on \(host), which is not a loopback address: give --tls-cert, --tls-key and --tls-ca, or --insecure"
            )
        }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0-65535 (got \(port))") }
        guard maxFrameSize >= 1024 else { throw ValidationError("--max-frame-size must be at least 1024 bytes") }
        guard maxConnections >= 1 else { throw ValidationError("--max-connections must be at least 1") }
        guard maxConnectionsPerPeer >= 1 else { throw ValidationError("--max-connections-per-peer must be at least 1") }
        guard (1...1_000_000).contains(maxConcurrentCalls) else {
            throw ValidationError("--max-concurrent-calls must be 1-1000000 (got \(maxConcurrentCalls))")
        }
        guard (1...1_048_576).contains(memoryBudget) else {
            throw ValidationError("--memory-budget must be 1-1048576 MiB (got \(memoryBudget))")
        }
        guard (1...1024).contains(workers) else { throw ValidationError("--workers must be 1-1024 (got \(workers))") }
        guard (1...1024).contains(loops) else { throw ValidationError("--loops must be 1-1024 (got \(loops))") }
        guard (1...1024).contains(laneThreads) else {
            throw ValidationError("--lane-threads must be 1-1024 (got \(laneThreads))")
        }
        guard (0...1_000_000).contains(laneQueue) else {
            throw ValidationError("--lane-queue must be 0-1000000 (got \(laneQueue))")
        }
        guard (1...1024).contains(jobThreads) else {
            throw ValidationError("--job-threads must be 1-1024 (got \(jobThreads))")
        }
        guard (1...1_000_000).contains(maxJobs) else {
            throw ValidationError("--max-jobs must be 1-1000000 (got \(maxJobs))")
        }
        guard (1...1_000_000).contains(maxJobsPerUser) else {
            throw ValidationError("--max-jobs-per-user must be 1-1000000 (got \(maxJobsPerUser))")
        }
        guard (0...1 << 30).contains(uploadMinRate) else {
            throw ValidationError("--upload-min-rate must be 0-1073741824 bytes/s (got \(uploadMinRate))")
        }
        guard (1...1_000_000).contains(maxUploads) else {
            throw ValidationError("--max-uploads must be 1-1000000 (got \(maxUploads))")
        }
        guard (1...1_000_000).contains(maxUploadsPerPeer) else {
            throw ValidationError("--max-uploads-per-peer must be 1-1000000 (got \(maxUploadsPerPeer))")
        }
        for (name, value) in [
            ("idle-timeout", idleTimeout), ("frame-timeout", frameTimeout), ("shutdown-grace", shutdownGrace),
            ("upload-idle-timeout", uploadIdleTimeout),
        ] {
            // Counted in milliseconds in an Int64 at runtime (1e300 trapped); 11 days is more than any limit needs.
            guard value.isFinite, value > 0, value <= 1_000_000 else {
                throw ValidationError(
                    "--\(name) must be a number of seconds above 0 and at most 1000000 (got \(value))")
            }
        }
    }

    /// `--identity`, else `$MENAGERIE_IDENTITY`; nil: the data directory's.
    public var identityPath: String? {
        identity ?? ProcessInfo.processInfo.environment["MENAGERIE_IDENTITY"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The admin token: `$MENAGERIE_ADMIN_TOKEN`, else the first line of `--admin-token-file` (or
    /// `$MENAGERIE_ADMIN_TOKEN_FILE`); nil when none is given. A given file that cannot be read, or a token
    /// shorter than 32 characters (guessable), is an error rather than a stack without its admin.
    public func adminToken() throws -> String? {
        let environment = ProcessInfo.processInfo.environment
        var token = environment["MENAGERIE_ADMIN_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        if token == nil,
            let file = adminTokenFile ?? environment["MENAGERIE_ADMIN_TOKEN_FILE"].flatMap({ $0.isEmpty ? nil : $0 })
        {
            token =
                try String(contentsOfFile: file, encoding: .utf8).split(whereSeparator: \.isNewline).first.map(
                    String.init) ?? ""
        }
        if let token, token.count < 32 { throw ValidationError("the admin token must be at least 32 characters") }
        return token
    }

    /// The runtime limits these flags describe.
    public var limits: TCPServer.Limits {
        var limits = TCPServer.Limits()
        limits.maxFrameSize = maxFrameSize
        limits.maxConnections = maxConnections
        limits.maxConnectionsPerPeer = maxConnectionsPerPeer
        limits.maxConcurrentCalls = maxConcurrentCalls
        limits.memoryBudget = memoryBudget << 20
        limits.workers = workers
        limits.loops = loops
        limits.idleTimeout = .milliseconds(Int64(idleTimeout * 1000))
        limits.frameTimeout = .milliseconds(Int64(frameTimeout * 1000))
        limits.uploadIdleTimeout = .milliseconds(Int64(uploadIdleTimeout * 1000))
        limits.uploadMinimumRate = uploadMinRate
        limits.maxUploads = maxUploads
        limits.maxUploadsPerPeer = maxUploadsPerPeer
        return limits
    }

    /// The bounds of the service's jobs (`ServiceJobs`).
    public var jobOptions: JobLimits {
        JobLimits(threads: jobThreads, maxActive: maxJobs, maxActivePerSubmitter: maxJobsPerUser)
    }
}

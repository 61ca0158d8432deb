import ArgumentParser
import Base
import Foundation
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

    @Option(name: .customLong("database"), help: "The service's SQLite file, which replicas may share (default: DATA_DIR/SERVICE.sqlite, e.g. zoo.sqlite).")
    public var database: String?

    @Option(name: .customLong("log-level"), help: "debug, info, warning or error.")
    public var logLevel = "info"

    @Option(name: .customLong("log-format"), help: "text (for people), logfmt or json (one JSON object a line), for log pipelines.")
    public var logFormat = "text"

    @Option(name: .customLong("max-frame-size"), help: "Largest frame a client may send, in bytes.")
    public var maxFrameSize = FrameCodec.defaultMaxFrameSize

    @Option(name: .customLong("max-connections"), help: "Connections served at once; beyond it the longest-idle connection is closed to make room, or the newcomer refused when every connection has a call open.")
    public var maxConnections = 1024

    @Option(name: .customLong("max-connections-per-peer"), help: "Connections from one client address served at once (same rule as --max-connections).")
    public var maxConnectionsPerPeer = 256

    @Option(name: .customLong("max-concurrent-calls"), help: "Calls one connection may have open at once; more are answered RESOURCE_EXHAUSTED.")
    public var maxConcurrentCalls = 100

    @Option(name: .customLong("memory-budget"), help: "MiB the server may hold for large frames still arriving and answers clients have not read; beyond it large frames are refused (RESOURCE_EXHAUSTED) and the connections holding the most are closed.")
    public var memoryBudget = 256

    @Option(name: .customLong("workers"), help: "Handlers that run at once (default: one per core; calls measured at 5 ms or more run on all but one).")
    public var workers = ProcessInfo.processInfo.activeProcessorCount

    @Option(name: .customLong("lane-threads"), help: "Threads of the heavy-work lane (blocking and CPU-bound work, jobs; default: one per core).")
    public var laneThreads = ProcessInfo.processInfo.activeProcessorCount

    @Option(name: .customLong("lane-queue"), help: "Work items that may wait for a lane thread; more are refused with RESOURCE_EXHAUSTED.")
    public var laneQueue = 64

    @Option(name: .customLong("idle-timeout"), help: "Seconds an idle connection is kept open.")
    public var idleTimeout = 300.0

    @Option(name: .customLong("frame-timeout"), help: "Seconds a client has to finish a frame it started (and its first one).")
    public var frameTimeout = 10.0

    @Option(name: .customLong("shutdown-grace"), help: "Seconds calls in flight get to finish on SIGTERM/SIGINT.")
    public var shutdownGrace = 10.0

    @Option(name: .customLong("tls-cert"), help: "The service's TLS certificate (PEM): it then serves TLS only, mutual TLS on the binary protocol. Reloaded on SIGHUP.")
    public var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: "The private key of --tls-cert (PEM).")
    public var tlsKey: String?

    @Option(name: .customLong("tls-ca"), help: "The CA whose client certificates the binary protocol accepts (PEM; compose up --tls makes one).")
    public var tlsCA: String?

    @Flag(name: .customLong("insecure"), help: "Serve plaintext on a non-loopback --host (refused otherwise: use TLS there).")
    public var insecure = false

    public init() {}

    /// Whether `host` is a loopback address, where plaintext stays available for development.
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// The TLS credentials the flags name, loaded (nil: plaintext).
    public func tlsCredentials() throws -> TLSCredentials? {
        guard let tlsCertificate, let tlsKey, let tlsCA else { return nil }
        return try TLSCredentials.server(certificateFile: tlsCertificate, keyFile: tlsKey, caFile: tlsCA)
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
        let tlsFlags = [tlsCertificate, tlsKey, tlsCA].compactMap { $0 }.count
        guard tlsFlags == 0 || tlsFlags == 3 else {
            throw ValidationError("--tls-cert, --tls-key and --tls-ca go together (TLS needs the certificate, its key and the CA of clients)")
        }
        if tlsFlags == 0, !insecure, !Self.isLoopback(host) {
            throw ValidationError("refusing to serve plaintext on \(host), which is not a loopback address: give --tls-cert, --tls-key and --tls-ca, or --insecure")
        }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0-65535 (got \(port))") }
        guard maxFrameSize >= 1024 else { throw ValidationError("--max-frame-size must be at least 1024 bytes") }
        guard maxConnections >= 1 else { throw ValidationError("--max-connections must be at least 1") }
        guard maxConnectionsPerPeer >= 1 else { throw ValidationError("--max-connections-per-peer must be at least 1") }
        guard (1...1_000_000).contains(maxConcurrentCalls) else {
            throw ValidationError("--max-concurrent-calls must be 1-1000000 (got \(maxConcurrentCalls))")
        }
        guard (1...1_048_576).contains(memoryBudget) else { throw ValidationError("--memory-budget must be 1-1048576 MiB (got \(memoryBudget))") }
        guard (1...1024).contains(workers) else { throw ValidationError("--workers must be 1-1024 (got \(workers))") }
        guard (1...1024).contains(laneThreads) else { throw ValidationError("--lane-threads must be 1-1024 (got \(laneThreads))") }
        guard (0...1_000_000).contains(laneQueue) else { throw ValidationError("--lane-queue must be 0-1000000 (got \(laneQueue))") }
        for (name, value) in [("idle-timeout", idleTimeout), ("frame-timeout", frameTimeout), ("shutdown-grace", shutdownGrace)] {
            // Counted in milliseconds in an Int64 at runtime (1e300 trapped); 11 days is more than any limit needs.
            guard value.isFinite, value > 0, value <= 1_000_000 else {
                throw ValidationError("--\(name) must be a number of seconds above 0 and at most 1000000 (got \(value))")
            }
        }
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
        limits.idleTimeout = .milliseconds(Int64(idleTimeout * 1000))
        limits.frameTimeout = .milliseconds(Int64(frameTimeout * 1000))
        return limits
    }
}

import Allocator
import Base
import Dispatch
import Dqlite
import Foundation
import HTTP
import Identity
import Jobs
import RPC
import Storage
import Synchronization
import Transport
import WorkLane

/// What a service's setup hands the runner: the RPC services it serves and the background services that
/// run beside them (a refresh schedule, the job runner), and any plain HTTP routes served beside Connect
/// on the same port (a REST API, a web page). The runner starts them together and stops them together.
public struct AppServices: Sendable {
    public var rpcServices: [any RPCService]
    public var backgroundServices: [any BackgroundService]
    public var httpRoutes: HTTPRoutes?
    /// Which calls the Connect face may answer again from bytes it kept (nil: every call runs its handler).
    public var answerCache: AnswerCachePolicy?
    /// Who may call each method of `rpcServices` (checked by the server before a handler runs, with the
    /// stack's identity): the levels the protos declare (`.declared`), with a service's few overrides; nil: every
    /// call runs, anonymous (test services).
    public var access: AccessRules?

    public init(
        rpc rpcServices: [any RPCService], background backgroundServices: [any BackgroundService] = [],
        http httpRoutes: HTTPRoutes? = nil,
        access: AccessRules? = nil, answerCache: AnswerCachePolicy? = nil
    ) {
        self.answerCache = answerCache
        self.rpcServices = rpcServices
        self.backgroundServices = backgroundServices
        self.httpRoutes = httpRoutes
        self.access = access
    }
}

/// Runs a service executable, after swift-service-lifecycle's `ServiceGroup`: creates its data directory,
/// serves its RPC services over TCP beside its background services, logs one line at start and stop, and
/// on SIGTERM or SIGINT stops them together: health checks answer NOT_SERVING and the port closes, new calls
/// get UNAVAILABLE, calls in flight get the grace period to finish while the background services are asked
/// to stop (a running job ends failed by the shutdown), then the connections close.
///
/// It never ends the process: it returns, or throws `Failure`, and the executable's `main` picks the exit
/// status (0 after a graceful stop, 1 after a failure), so a test or a host can run a service in process.
public enum ServiceRunner {
    /// What a service's setup gets to build its services from.
    public struct Environment: Sendable {
        /// The service's data directory, created and absolute.
        public let dataDirectory: URL
        /// The service's SQLite file: `--database`, else `NAME.sqlite` in the data directory.
        public let databasePath: String
        public let logger: Logger
        /// The heavy-work lane (`--lane-threads`, `--lane-queue`): a handler runs blocking and CPU-bound work
        /// here (`try await lane.run { … }`) so its server worker serves other calls meanwhile (jobs run apart,
        /// see `jobs`). Past its queue limit work is refused at once (`WorkLane.QueueFull`, RESOURCE_EXHAUSTED).
        public let lane: WorkLane
        /// Threads and bounds of the service's jobs (`--job-threads`, `--max-jobs`, `--max-jobs-per-user`),
        /// which run apart from the lane: give them to `ServiceJobs`.
        public let jobs: JobLimits
        /// How long calls in flight and background services get to finish when the service stops
        /// (`--shutdown-grace`).
        public let shutdownGrace: Duration
        /// This replica's dqlite node when the service runs with `--cluster` (nil: the SQLite file).
        public let cluster: DqliteReplica?
        /// Whether the setup opened its database with `openDatabase`, the one way onto the cluster: a service
        /// that reads `databasePath` instead would quietly keep its data in a file with `--cluster` given.
        let openedDatabase = Flag()

        final class Flag: Sendable {
            private let value = Atomic<Bool>(false)
            func set() { value.store(true, ordering: .releasing) }
            var isSet: Bool { value.load(ordering: .acquiring) }
        }
        /// The stack's users and tokens (`--identity`), shared by every replica of every service.
        public let identity: IdentityStore
        /// The checker of tokens over `identity`, which also knows the admin token this process was given.
        public let verifier: TokenVerifier
    }

    /// How a service that stopped on a signal stopped.
    public enum Stop: Sendable, Equatable {
        /// It served, then drained on `signal`.
        case drained(signal: String)
        /// The signal came while it started up (opening or migrating its data, which is transactional):
        /// it stopped at once, without waiting for its setup, and never served.
        case stoppedWhileStarting(signal: String)
    }

    /// Why a service stopped other than on a signal; logged before it is thrown.
    public enum Failure: Error, Sendable, CustomStringConvertible {
        /// The data directory, the setup (opening the database, say) or the port failed.
        case startup(String)
        /// A background service failed or ended while the service ran; the rest was stopped gracefully.
        case backgroundService(name: String, reason: String)

        public var description: String {
            switch self {
            case .startup(let reason): "failed to start: \(reason)"
            case .backgroundService(let name, let reason): "background service \(name) \(reason)"
            }
        }
    }

    /// A background service gets the grace period to stop and this much more to record what it stopped.
    static let recordingMargin: Duration = .seconds(5)

    /// Starts the service that `setup` describes and serves until SIGTERM or SIGINT, or until a background
    /// service fails; then stops it gracefully and returns how it stopped, or throws the failure.
    ///
    /// The signals are caught from the very start: one while `setup` runs stops at once (the setup's task
    /// is cancelled and not waited for; what it does to the database is transactional).
    @discardableResult
    public static func run(
        name: String, options: ServiceOptions, setup: @escaping @Sendable (Environment) async throws -> AppServices
    ) async throws(Failure) -> Stop {
        Allocator.tune()
        Logger.level = LogLevel(name: options.logLevel) ?? .info
        Logger.format = LogFormat(name: options.logFormat) ?? .text
        let logger = Logger(label: name)
        let (events, sink) = AsyncStream.makeStream(of: Event.self)
        let signals = TerminationSignals { sink.yield(.signal($0)) }
        defer { withExtendedLifetime(signals) {} }
        var pending = events.makeAsyncIterator()

        let directory = URL(fileURLWithPath: options.dataDirectory).standardizedFileURL
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            return try stopStarting(
                logger, "cannot create data directory \(directory.path): \(error.localizedDescription)")
        }
        let grace = Duration.milliseconds(Int64(options.shutdownGrace * 1000))
        let identity: IdentityStore
        let verifier: TokenVerifier
        do {
            let path = options.identityPath ?? directory.appendingPathComponent("identity.sqlite").path
            identity = try IdentityStore(path: path)
            verifier = try TokenVerifier(store: identity, adminToken: try options.adminToken())
        } catch {
            return try stopStarting(logger, "cannot open the identity store: \(error)")
        }
        // Joining waits for the cluster's leader (node 1, or a quorum of the others, must be up).
        let cluster: DqliteReplica?
        do {
            cluster = try options.clusterAddresses.map { addresses in
                // The cluster's own certificates (compose makes them on every stack of nodes), else the service's TLS:
                // Raft traffic and statements go through mutual TLS (the certificate names the member's address).
                let tls = try options.clusterTLSCredentials().map { try ClusterTLS(credentials: $0) }
                return try DqliteReplica(
                    addresses: addresses, ownAddress: options.clusterBind ?? "", id: options.clusterID,
                    bindAddress: options.clusterListen,
                    dataDirectory: options.clusterDirectory ?? directory.appendingPathComponent("dqlite").path,
                    database: name,
                    networkLatency: options.clusterLatency.map { .milliseconds($0) }, tls: tls)
            }
        } catch {
            return try stopStarting(logger, "cannot start the dqlite node: \(error)")
        }
        if let cluster {
            logger.info(
                "dqlite node \(cluster.node.id) at \(cluster.node.address) joined the cluster \(cluster.client.addresses.joined(separator: ","))"
            )
        }
        defer { try? cluster?.stop() }
        let environment = Environment(
            dataDirectory: directory,
            databasePath: options.database ?? directory.appendingPathComponent("\(name).sqlite").path,
            logger: logger, lane: WorkLane(name: "lane", threads: options.laneThreads, queueLimit: options.laneQueue),
            jobs: options.jobOptions, shutdownGrace: grace, cluster: cluster, identity: identity, verifier: verifier)
        // Unstructured, so that a signal need not wait for a setup stuck in a long migration.
        let starting = Task {
            do {
                sink.yield(.setUp(.success(try await setup(environment))))
            } catch {
                sink.yield(.setUp(.failure(error)))
            }
        }
        let services: AppServices
        switch await pending.next() {
        case .signal(let signal):
            logger.info("received \(signal) while starting; stopping")
            starting.cancel()
            return .stoppedWhileStarting(signal: signal)
        case .setUp(.failure(let error)):
            return try stopStarting(logger, "\(error)")
        case .setUp(.success(let made)):
            guard cluster == nil || environment.openedDatabase.isSet else {
                return try stopStarting(
                    logger,
                    "--cluster: \(name) keeps its data in the SQLite file; it cannot run on a dqlite cluster yet")
            }
            services = made
        case .backgroundEnded, nil:
            preconditionFailure("background services run only once the service started")
        }

        let server: TCPServer
        do {
            let callGuard = services.access.map {
                IdentityGuard(rules: $0, verifier: verifier, throttle: FailedAuthThrottle(logger: logger))
            }
            server = try makeServer(
                RPCServer(name: name, services: services.rpcServices, logger: logger, guard: callGuard), services,
                options, logger)
        } catch {
            return try stopStarting(logger, "\(error)")
        }
        let reloads = server.tls.map { credentials in
            CertificateReloads { reloadCertificates(credentials, logger) }
        }
        defer { withExtendedLifetime(reloads) {} }
        let background = BackgroundGroup(services.backgroundServices, logger: logger) {
            sink.yield(.backgroundEnded(name: $0, reason: $1))
        }
        logger.info(
            "started: pid \(getpid()), listening on \(server.address), data in \(directory.path), version \(menagerieVersion)"
        )

        let outcome: Result<Stop, Failure>
        switch await pending.next() {
        case .signal(let signal):
            logger.info("received \(signal); draining (grace \(options.shutdownGrace)s)")
            outcome = .success(.drained(signal: signal))
        case .backgroundEnded(let service, let reason):
            logger.error("background service \(service) \(reason); stopping the service")
            outcome = .failure(.backgroundService(name: service, reason: reason))
        case .setUp, nil:
            preconditionFailure("the setup reports once")
        }
        // Together: the server drains its calls while the background services stop.
        async let drained: Void = server.shutdown(grace: grace)
        await background.stop(within: grace + recordingMargin, logger: logger)
        await drained
        logger.info("stopped after \(String(format: "%.1f", server.rpc.uptimeSeconds))s")
        return try outcome.get()
    }

    /// The one place the server is made (the transport seam replaces it).
    private static func makeServer(
        _ rpc: RPCServer, _ services: AppServices, _ options: ServiceOptions, _ logger: Logger
    ) throws -> TCPServer {
        let server = TCPServer(host: options.host, port: options.port, limits: options.limits, logger: logger)
        // One budget for the process: uploads, queued batches and model loading draw from the server's.
        MemoryBudget.install(server.budget)
        if let routes = services.httpRoutes { server.serveHTTP(routes) }
        if let policy = services.answerCache { server.cacheAnswers(policy) }
        if let credentials = try options.tlsCredentials() {
            server.serveTLS(credentials)
            logger.info(
                "serving TLS only (mutual TLS on the binary protocol) with \(credentials.context.certificate?.subject ?? "?"), CA \(credentials.caFile); SIGHUP reloads the certificates"
            )
        }
        return try rpc.serve(over: server)
    }

    /// SIGHUP: the certificate files are loaded again for new connections; open ones keep theirs.
    private static func reloadCertificates(_ credentials: TLSCredentials, _ logger: Logger) {
        do {
            let certificate = try credentials.reload()
            let expiry = certificate?.notAfter.map { " (valid until \($0))" } ?? ""
            logger.info(
                "received SIGHUP; reloaded TLS certificates: \(certificate?.subject ?? "?")\(expiry); open connections keep theirs"
            )
        } catch {
            logger.error("received SIGHUP; TLS certificates not reloaded, keeping the ones in use: \(error)")
        }
    }

    private static func stopStarting(_ logger: Logger, _ reason: String) throws(Failure) -> Stop {
        let failure = Failure.startup(reason)
        logger.error("\(failure)")
        throw failure
    }

    /// What the runner waits for.
    enum Event: Sendable {
        case signal(String)
        case setUp(Result<AppServices, any Error>)
        case backgroundEnded(name: String, reason: String)
    }
}

/// The background services of a running service, each in its own task; an end they were not asked for is
/// reported, and `stop` cancels them and waits, bounded, for them to return.
private final class BackgroundGroup: Sendable {
    private struct State {
        var stopping = false
        var running: Set<String> = []
        var tasks: [Task<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Starts `services`; `ended` gets the name and the reason of one that returns or throws unasked.
    init(_ services: [any BackgroundService], logger: Logger, ended: @escaping @Sendable (String, String) -> Void) {
        for (index, service) in services.enumerated() {
            // Unique names, so that each task can be told apart in `running`.
            let name =
                services.filter({ $0.name == service.name }).count > 1 ? "\(service.name) #\(index + 1)" : service.name
            state.withLock { _ = $0.running.insert(name) }
            let task = Task { [self] in
                var reason = "ended before the service stopped"
                var failedWhileStopping = false
                do {
                    try await service.run()
                } catch {
                    reason = "failed: \(error)"
                    failedWhileStopping = !(error is CancellationError)
                }
                let asked = state.withLock { state in
                    state.running.remove(name)
                    return state.stopping
                }
                if !asked {
                    ended(name, reason)
                } else if failedWhileStopping {
                    logger.warning("background service \(name) \(reason) while stopping")
                }
            }
            state.withLock { $0.tasks.append(task) }
        }
    }

    /// Cancels every background service and waits up to `limit` for them to return; those that do not are
    /// logged and left (the process is about to end).
    func stop(within limit: Duration, logger: Logger) async {
        let tasks = state.withLock { state in
            state.stopping = true
            return state.tasks
        }
        for task in tasks { task.cancel() }
        let deadline = ContinuousClock.now + limit
        while !state.withLock({ $0.running.isEmpty }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        for name in state.withLock({ $0.running }).sorted() {
            logger.warning("background service \(name) did not stop within \(limit); leaving it")
        }
    }
}

/// SIGHUP, caught while this lives: `received` runs on each (reloading certificates).
private final class CertificateReloads: @unchecked Sendable {
    private let source: any DispatchSourceSignal

    init(received: @escaping @Sendable () -> Void) {
        signal(SIGHUP, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler { received() }
        source.resume()
    }

    deinit {
        source.cancel()
        signal(SIGHUP, SIG_DFL)
    }
}

/// SIGTERM and SIGINT, caught from the moment this is made (their default action, ending the process,
/// is switched off) and passed to `received`, each time one arrives; their default action is back once
/// this goes.
private final class TerminationSignals: @unchecked Sendable {
    private let sources: [any DispatchSourceSignal]

    init(received: @escaping @Sendable (String) -> Void) {
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { received(name) }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    deinit {
        for source in sources { source.cancel() }
        signal(SIGTERM, SIG_DFL)
        signal(SIGINT, SIG_DFL)
    }
}

extension ServiceRunner.Environment {
    /// The service's database: the dqlite cluster's (a database named after the service) with `--cluster`,
    /// else the SQLite file at `databasePath`; `migrations` run once (per cluster, or per file).
    public func openDatabase(migrations: [Migration], readers: Int = 4) throws -> Database {
        openedDatabase.set()
        if let cluster { return try Database(cluster: cluster.client, migrations: migrations, readers: readers) }
        return try Database(path: databasePath, migrations: migrations, readers: readers)
    }
}

extension ClusterTLS {
    /// The cluster's TLS on the files `credentials` were loaded from (a server's: its certificate, key and CA).
    convenience init(credentials: TLSCredentials) throws(DqliteError) {
        guard let certificate = credentials.certificateFile, let key = credentials.keyFile else {
            throw DqliteError(.misuse, "a cluster over TLS needs the member's certificate and key, not only a CA")
        }
        try self.init(certificateFile: certificate, keyFile: key, caFile: credentials.caFile)
    }
}

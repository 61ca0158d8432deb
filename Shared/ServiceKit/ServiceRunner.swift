import Base
import Dispatch
import Foundation
import RPC
import Synchronization
import Transport
import WorkLane

/// Runs a service executable: creates its data directory, serves its RPC services over TCP, logs
/// one line at start and stop, and shuts down gracefully on SIGTERM or SIGINT (exit status 0).
public enum ServiceRunner {
    /// What a service's setup gets to build its services from.
    public struct Environment: Sendable {
        /// The service's data directory, created and absolute.
        public let dataDirectory: URL
        public let logger: Logger
        /// The heavy-work lane (`--lane-threads`, `--lane-queue`): a handler runs blocking and CPU-bound work
        /// here (`try await lane.run { … }`) so its server worker serves other calls meanwhile, and jobs run
        /// here. Past its queue limit work is refused at once (`ThreadPool.QueueFull`, RESOURCE_EXHAUSTED).
        public let lane: ThreadPool
    }

    /// Serves until a termination signal arrives, then drains and exits the process.
    public static func run(
        name: String, options: ServiceOptions,
        services makeServices: (Environment) async throws -> [any RPCService]
    ) async throws -> Never {
        Logger.level = LogLevel(name: options.logLevel) ?? .info
        Logger.format = LogFormat(name: options.logFormat) ?? .text
        let logger = Logger(label: name)
        // Caught from the very start: a SIGTERM while the service starts up (opening or migrating
        // its data, which is transactional) exits 0 at once, as one while serving does after draining.
        let termination = TerminationSignals(logger: logger)
        let directory = URL(fileURLWithPath: options.dataDirectory).standardizedFileURL
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            logger.error("cannot create data directory \(directory.path): \(error.localizedDescription)")
            exit(1)
        }
        let server: TCPServer
        do {
            let lane = ThreadPool(name: "lane", threads: options.laneThreads, queueLimit: options.laneQueue)
            let services = try await makeServices(Environment(dataDirectory: directory, logger: logger, lane: lane))
            let rpc = RPCServer(name: name, services: services, logger: logger)
            server = try rpc.serve(over: TCPServer(host: options.host, port: options.port, limits: options.limits, logger: logger))
        } catch {
            logger.error("failed to start: \(error)")
            exit(1)
        }
        logger.info("started: pid \(getpid()), listening on \(server.address), data in \(directory.path), version \(menagerieVersion)")
        let signal = await termination.first()
        logger.info("received \(signal); draining (grace \(options.shutdownGrace)s)")
        await server.shutdown(grace: .milliseconds(Int64(options.shutdownGrace * 1000)))
        logger.info("stopped after \(String(format: "%.1f", server.rpc.uptimeSeconds))s")
        exit(0)
    }

}

/// SIGTERM and SIGINT, caught from the moment this is made: before `first()` is awaited (while the
/// service starts) the first one exits the process with status 0; afterwards it resumes `first()`.
private final class TerminationSignals: @unchecked Sendable {
    private let state = Mutex<(waiter: CheckedContinuation<String, Never>?, waiting: Bool, fired: Bool)>((nil, false, false))
    /// Kept alive for the life of the process.
    private let sources: [any DispatchSourceSignal]

    init(logger: Logger) {
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            sources.append(source)
        }
        self.sources = sources
        for (source, name) in zip(sources, ["SIGTERM", "SIGINT"]) {
            source.setEventHandler { [self] in
                let (waiter, starting) = state.withLock { state -> (CheckedContinuation<String, Never>?, Bool) in
                    guard !state.fired else { return (nil, false) }
                    state.fired = true
                    defer { state.waiter = nil }
                    return (state.waiter, !state.waiting)
                }
                if starting {
                    logger.info("received \(name) while starting; exiting")
                    exit(0)
                }
                waiter?.resume(returning: name)
            }
            source.resume()
        }
    }

    /// Suspends until SIGTERM or SIGINT arrives; returns its name.
    func first() async -> String {
        await withCheckedContinuation { continuation in
            state.withLock { state in
                state.waiting = true
                state.waiter = continuation
            }
        }
    }
}

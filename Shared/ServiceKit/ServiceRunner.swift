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
        /// The heavy-work lane (`--lane-threads`, `--lane-queue`): run blocking and CPU-bound work here.
        public let lane: HeavyWorkLane
    }

    /// Serves until a termination signal arrives, then drains and exits the process.
    public static func run(
        name: String, options: ServiceOptions,
        services makeServices: (Environment) async throws -> [any RPCService]
    ) async throws -> Never {
        Logger.level = LogLevel(name: options.logLevel) ?? .info
        let logger = Logger(label: name)
        let directory = URL(fileURLWithPath: options.dataDirectory).standardizedFileURL
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            logger.error("cannot create data directory \(directory.path): \(error.localizedDescription)")
            exit(1)
        }
        let server: TCPServer
        do {
            let lane = HeavyWorkLane(threads: options.laneThreads, queueLimit: options.laneQueue)
            let services = try await makeServices(Environment(dataDirectory: directory, logger: logger, lane: lane))
            let rpc = RPCServer(name: name, services: services, logger: logger)
            server = try TCPServer(rpc: rpc, host: options.host, port: options.port, limits: options.limits, logger: logger)
        } catch {
            logger.error("failed to start: \(error)")
            exit(1)
        }
        logger.info("started: pid \(getpid()), listening on \(server.address), data in \(directory.path), version \(menagerieVersion)")
        let signal = await firstTerminationSignal()
        logger.info("received \(signal); draining (grace \(options.shutdownGrace)s)")
        await server.shutdown(grace: .milliseconds(Int64(options.shutdownGrace * 1000)))
        logger.info("stopped after \(String(format: "%.1f", server.rpc.uptimeSeconds))s")
        exit(0)
    }

    /// Suspends until SIGTERM or SIGINT arrives; returns its name.
    private static func firstTerminationSignal() async -> String {
        await withCheckedContinuation { continuation in
            let once = OnceFlag()
            for (number, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler {
                    if once.claim() { continuation.resume(returning: name) }
                }
                source.resume()
                signalSources.append(source)
            }
        }
    }

    nonisolated(unsafe) private static var signalSources: [any DispatchSourceSignal] = []
}

/// True for the first caller only.
private final class OnceFlag: Sendable {
    private let flag = Mutex(false)

    func claim() -> Bool {
        flag.withLock { claimed in
            defer { claimed = true }
            return !claimed
        }
    }
}

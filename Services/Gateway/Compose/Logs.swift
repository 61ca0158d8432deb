import ComposeKit
import Foundation
import GatewayKit

#if canImport(Glibc)
    import Glibc
#endif

/// `logs [-f] SERVICE`: its replicas' logs, one machine's and every node's.
extension Compose {
    func logs(_ arguments: [String]) throws(ComposeFailure) {
        var arguments = arguments
        let follow = arguments.first == "-f"
        if follow { arguments.removeFirst() }
        guard arguments.count == 1 else { throw ComposeFailure("usage: compose logs [-f] SERVICE") }
        let service = try manifest.service(arguments[0])
        let files = logFiles(of: service.name)
        if follow {
            // Replicas that have not logged yet (not started, or starting) are waited for, not a reason to stop.
            if files.isEmpty { Self.warn("compose: no logs for \(service.name) yet; waiting for its replicas\n") }
            followLogs(of: service.name)
        }
        guard !files.isEmpty else { throw ComposeFailure("no logs for \(service.name) yet") }
        Programs.run(["tail", "-n", "200"] + files.map(\.path))
    }

    /// The logs of `service`'s replicas and the names they are shown under (`zoo.0`, `node2/zoo.0`).
    private func logFiles(of service: String) -> [(path: String, name: String)] {
        func logs(in directory: String, prefix: String) -> [(path: String, name: String)] {
            Files.list("\(directory)/logs", suffix: ".log").filter { $0.hasPrefix("\(service).") }.map {
                ("\(directory)/logs/\($0)", prefix + String($0.dropLast(4)))
            }
        }
        return logs(in: state, prefix: "")
            + Files.list("\(state)/nodes").flatMap { logs(in: "\(state)/nodes/\($0)", prefix: "node\($0)/") }
    }

    /// Follows every replica's log, each line behind its replica's name, taking in the logs of replicas that start
    /// later (scale) as they appear; a log that appears later is shown from its start. Ends, its tails with it, on
    /// SIGINT or SIGTERM, or when the state directory it followed is removed.
    private func followLogs(of service: String) -> Never {
        let tails = TailSet()
        for signal in [SIGINT, SIGTERM] {
            Glibc.signal(signal, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .main)
            source.setEventHandler {
                tails.stop()
                exit(0)
            }
            source.resume()
            Signals.keep(source)
        }
        Thread.detachNewThread {
            var seen: Set<String> = [], lines = "50", hadState = false
            while true {
                if Files.exists(state) {
                    hadState = true
                } else if hadState {
                    tails.stop()
                    exit(0)
                }
                for file in logFiles(of: service) where seen.insert(file.path).inserted {
                    tails.follow(file.path, from: lines, as: file.name)
                }
                lines = "+1"
                sleep(1)
            }
        }
        dispatchMain()
    }
}

/// Keeps the signal sources alive for the process's life.
enum Signals {
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []
    static func keep(_ source: any DispatchSourceSignal) { sources.append(source) }
}

/// The `tail -F`s of `logs -f`, their lines written out whole behind their replica's name.
final class TailSet: @unchecked Sendable {
    private let lock = NSLock()
    private var processes: [Process] = []

    func follow(_ path: String, from lines: String, as name: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["tail", "-n", lines, "-F", path]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        lock.lock()
        defer { lock.unlock() }
        guard (try? process.run()) != nil else { return }
        processes.append(process)
        let output = pipe.fileHandleForReading
        Thread.detachNewThread {
            var pending = Data()
            while case let data = output.availableData, !data.isEmpty {
                pending.append(data)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    FileHandle.standardOutput.write(Data("\(name) | ".utf8) + pending[pending.startIndex...newline])
                    pending.removeSubrange(pending.startIndex...newline)
                }
            }
        }
    }

    func stop() {
        lock.lock()
        defer { lock.unlock() }
        for process in processes where process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

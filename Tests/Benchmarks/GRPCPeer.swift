import Foundation

/// Real gRPC C++ (Debian's libgrpc++-dev) doing the RPC benchmark's echo work, run as the peer program
/// in `../shared/peers/grpc-echo` so that its figures stand beside ours from the same run.
///
/// The program is built into the temporary folder `run.sh` uses (the peers folder may be read-only),
/// again only when its source is newer, and run once per configuration, right after our own rounds of that configuration, so a
/// drift of the VM's speed hits both alike. It measures as `Measurement` does: warm-up, calls started
/// inside the window, process CPU time per call with client and server in one process.
struct GRPCPeer {
    /// One configuration's figures, as the peer prints them.
    struct Figures {
        var callsPerSecond: Double
        var p50Milliseconds: Double
        var p99Milliseconds: Double
        var cpuMicrosPerCall: Double
    }

    let program: URL

    /// The peer's source folder: `<package root>/../shared/peers/grpc-echo`.
    static let sourceDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("shared/peers/grpc-echo")

    /// Builds the peer, or says why it cannot be measured here.
    static func prepare() -> Result<GRPCPeer, PeerUnavailable> {
        let build = sourceDirectory.appendingPathComponent("build.sh")
        guard FileManager.default.isExecutableFile(atPath: build.path) else {
            return .failure(PeerUnavailable("\(sourceDirectory.path) is missing"))
        }
        guard run("/bin/sh", ["-c", "pkg-config --exists grpc++ protobuf && command -v grpc_cpp_plugin"]).status == 0
        else {
            return .failure(
                PeerUnavailable(
                    "gRPC C++ is not installed (apt-get install libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev pkg-config g++)"
                ))
        }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("menagerie-grpc-echo")
        let program = output.appendingPathComponent("echo_bench")
        if modified(program) ?? .distantPast <= modified(sourceDirectory.appendingPathComponent("echo_bench.cc"))
            ?? .distantFuture
        {
            print("building the gRPC C++ peer (\(sourceDirectory.path)) into \(output.path)")
            let result = run(build.path, [output.path])
            guard result.status == 0 else {
                return .failure(PeerUnavailable("building it failed: \(result.output.suffix(400))"))
            }
        }
        return .success(GRPCPeer(program: program))
    }

    /// Measures one configuration; nil (with the reason printed) when the program fails.
    func measure(size: Int, callers: Int, rounds: Int, seconds: Double) -> Figures? {
        let result = Self.run(
            "/usr/bin/timeout",
            [
                "120", program.path, "--sizes", "\(size)", "--callers", "\(callers)", "--rounds", "\(rounds)",
                "--seconds", "\(seconds)",
            ])
        // The table's one data row: payload (two words), callers, calls/s, p50, p99, cpu µs/call.
        let rows: [[Substring]] = result.output.split(separator: "\n").map { $0.split(separator: " ") }
        let row = rows.first { $0.count == 7 && Int($0[2]) == callers }
        let values: [Double] = row.map { $0[3...].compactMap { Double($0) } } ?? []
        guard result.status == 0, values.count == 4 else {
            print(
                "gRPC peer failed at \(size) B, \(callers) callers (exit \(result.status)): \(result.output.suffix(300))"
            )
            return nil
        }
        return Figures(
            callsPerSecond: values[0], p50Milliseconds: values[1], p99Milliseconds: values[2],
            cpuMicrosPerCall: values[3])
    }

    private static func modified(_ file: URL) -> Date? {
        try? FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate] as? Date
    }

    /// Runs a program to its end; returns its exit status and what it printed (stdout and stderr).
    private static func run(_ path: String, _ arguments: [String]) -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        do {
            try process.run()
        } catch {
            return (-1, "\(error)")
        }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

/// Why the gRPC peer is not measured in this run.
struct PeerUnavailable: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

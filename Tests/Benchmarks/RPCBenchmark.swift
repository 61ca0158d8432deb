import Foundation
import RPC
import RPCTesting
import RPCWire
import Schema
import Transport

/// Unary echo over loopback through the whole RPC stack, beside a raw framed TCP echo on the same
/// event loop library (no envelope, no protobuf, no worker pool) measured in the same run, and the
/// same call as a browser makes it: Connect unary JSON over HTTP/1.1 on the same port (`HTTPEchoClient`,
/// one kept-alive connection per caller), and the RPC call over mutual TLS 1.3 (AES-128-GCM) on a second
/// server, with its CPU per call beside what AES-GCM itself costs for the bytes it seals and opens
/// (`openssl speed -evp aes-128-gcm`, given or the issue's figure).
///
/// The VM this runs on is shared and its speed drifts within seconds, so each configuration is
/// measured in `rounds` alternating raw/RPC pairs: calls/s, CPU per call and the ratio are medians
/// over the rounds, latency percentiles come from all rounds' samples. Real gRPC C++ (`GRPCPeer`) is
/// measured per configuration right after ours, when it is installed.
struct RPCBenchmark {
    let secondsPerRun: Double
    let rounds: Int
    let payloadSizes: [Int]
    let callerCounts: [Int]
    /// Whether to measure the raw floor too (off only when profiling the RPC path alone).
    let includeFloor: Bool
    /// Whether to measure the gRPC C++ peer too.
    let includePeer: Bool
    /// TCP connections the RPC and TLS clients spread their calls over (round robin): with one, a
    /// server's calls all arrive on one of its loops, whatever `--loops` says.
    var connections = 1

    func run() async throws {
        let duration = Duration.milliseconds(Int64(secondsPerRun * 1000))
        let rawServer = try RawEchoServer()
        let rpcServer = try TCPServer(
            rpc: RPCServer(name: "bench", services: [EchoService()]), port: 0, limits: benchLimits)
        let rawClient = try await RawEchoClient(endpoint: rawServer.address)
        let rpcClient = RPCClient(
            transports: try (0..<connections).map { _ in try TCPClientTransport(endpoint: rpcServer.address) })
        let httpClient = try await HTTPEchoClient(endpoint: rpcServer.address, connections: callerCounts.max() ?? 1)
        let certificates = try BenchCertificates()
        let tlsServer = TCPServer(port: 0, limits: benchLimits)
        tlsServer.serveTLS(
            try .server(
                certificateFile: certificates.server.certificate, keyFile: certificates.server.key,
                caFile: certificates.ca))
        try RPCServer(name: "bench-tls", services: [EchoService()]).serve(over: tlsServer)
        let tlsClient = RPCClient(
            transports: try (0..<connections).map { _ in
                try TCPClientTransport(
                    endpoint: tlsServer.address,
                    tls: .client(
                        certificateFile: certificates.client.certificate, keyFile: certificates.client.key,
                        caFile: certificates.ca))
            })
        let aesBytesPerSecond = BenchCertificates.aesGCMBytesPerSecond()
        if let aesBytesPerSecond {
            print(
                String(
                    format: "AES-128-GCM on one core (openssl speed; MENAGERIE_AES_GCM_BYTES_PER_SECOND): %.2f GB/s",
                    aesBytesPerSecond / 1e9))
        }
        print(
            "RPC benchmark: unary echo over loopback, \(rounds) rounds of \(secondsPerRun)s per configuration, \(ProcessInfo.processInfo.activeProcessorCount) cores, servers on \(serverLoops) loop(s), rpc and tls over \(connections) connection(s)"
        )
        var peer: GRPCPeer?
        if includePeer {
            switch GRPCPeer.prepare() {
            case .success(let built): peer = built
            case .failure(let reason): print("gRPC C++ peer not measured: \(reason)")
            }
        }
        var rows: [[String]] = []
        var verdicts: [String] = []
        for size in payloadSizes {
            let payload = [UInt8](repeating: 0xAB, count: size)
            let request = RpcV1.EchoRequest(payload: payload)
            for callers in callerCounts {
                var raws: [Measurement] = []
                var rpcs: [Measurement] = []
                var https: [Measurement] = []
                var tlss: [Measurement] = []
                for _ in 0..<rounds {
                    if includeFloor {
                        raws.append(
                            try await Measurement.run(callers: callers, duration: duration) {
                                _ = try await rawClient.echo(payload)
                            })
                    }
                    rpcs.append(
                        try await Measurement.run(callers: callers, duration: duration) {
                            _ = try await rpcClient.unary(RpcV1.Echo.echo, request)
                        })
                    https.append(
                        try await Measurement.run(callers: callers, duration: duration) {
                            _ = try await httpClient.echo(request)
                        })
                    tlss.append(
                        try await Measurement.run(callers: callers, duration: duration) {
                            _ = try await tlsClient.unary(RpcV1.Echo.echo, request)
                        })
                }
                let grpc = peer?.measure(size: size, callers: callers, rounds: rounds, seconds: secondsPerRun)
                let raw = includeFloor ? Measurement.combining(raws) : Measurement()
                let rpc = Measurement.combining(rpcs)
                let http = Measurement.combining(https)
                let tls = Measurement.combining(tlss)
                // Each call seals and opens its request and its response once: four times the payload.
                let aesMicros = aesBytesPerSecond.map { Double(4 * size) / $0 * 1e6 }
                let tlsExtra = tls.cpuMicrosPerCall - rpc.cpuMicrosPerCall
                let label = "\(sizeLabel(size)), \(callers) callers"
                let ratio =
                    includeFloor
                    ? median(zip(rpcs, raws).map { $1.callsPerSecond > 0 ? $0.callsPerSecond / $1.callsPerSecond : 0 })
                    : 0
                rows.append([
                    sizeLabel(size), "\(callers)",
                    String(format: "%.0f", raw.callsPerSecond), String(format: "%.3f", raw.percentileMilliseconds(0.5)),
                    String(format: "%.3f", raw.percentileMilliseconds(0.99)),
                    String(format: "%.0f", rpc.callsPerSecond), String(format: "%.3f", rpc.percentileMilliseconds(0.5)),
                    String(format: "%.3f", rpc.percentileMilliseconds(0.99)), String(format: "%.2f", ratio),
                    String(format: "%.1f", raw.cpuMicrosPerCall), String(format: "%.1f", rpc.cpuMicrosPerCall),
                    grpc.map { String(format: "%.0f", $0.callsPerSecond) } ?? "-",
                    grpc.map { String(format: "%.3f", $0.p99Milliseconds) } ?? "-",
                    grpc.map { String(format: "%.1f", $0.cpuMicrosPerCall) } ?? "-",
                    grpc.map { String(format: "%.2f", rpc.callsPerSecond / $0.callsPerSecond) } ?? "-",
                    grpc.map { String(format: "%.2f", rpc.cpuMicrosPerCall / $0.cpuMicrosPerCall) } ?? "-",
                    String(format: "%.0f", http.callsPerSecond),
                    String(format: "%.3f", http.percentileMilliseconds(0.99)),
                    String(format: "%.1f", http.cpuMicrosPerCall),
                    String(
                        format: "%.2f",
                        median(
                            zip(https, rpcs).map { $1.callsPerSecond > 0 ? $0.callsPerSecond / $1.callsPerSecond : 0 })),
                    String(format: "%.0f", tls.callsPerSecond),
                    String(format: "%.3f", tls.percentileMilliseconds(0.99)),
                    String(format: "%.1f", tls.cpuMicrosPerCall), String(format: "%.1f", tlsExtra),
                    aesMicros.map { String(format: "%.1f", $0) } ?? "-",
                ])
                if let aesMicros, size >= 64 << 10 {
                    let met = tlsExtra <= aesMicros * 1.3
                    verdicts.append(
                        "goal tls adds <= AES-GCM work + 30% at \(label): \(String(format: "%.1f", tlsExtra)) µs vs \(String(format: "%.1f", aesMicros)) µs of AES-GCM (\(String(format: "%.2f", tlsExtra / aesMicros))x) \(met ? "met" : "NOT met")"
                    )
                }
                if callers == 64 {
                    verdicts.append(
                        "goal rpc/raw calls/s >= 0.50 at \(label): \(String(format: "%.2f", ratio)) \(ratio >= 0.5 ? "met" : "NOT met")"
                    )
                }
                // Issue 28's: a small call at half its CPU, a large one near the floor.
                if size <= 64, callers == 64 {
                    let met = ratio >= 0.35 && rpc.cpuMicrosPerCall <= 12
                    verdicts.append(
                        String(
                            format:
                                "goal (issue 28) small call at %@: rpc/raw %.2f >= 0.35 and CPU %.1f <= 12 µs a call %@",
                            label, ratio, rpc.cpuMicrosPerCall, met ? "met" : "NOT met"))
                }
                if size >= 64 << 10, callers == 16 || callers == 64 {
                    verdicts.append(
                        String(
                            format: "goal (issue 28) large call at %@: rpc/raw %.2f >= 0.85 %@", label, ratio,
                            ratio >= 0.85 ? "met" : "NOT met"))
                }
                if let grpc, size >= 64 << 10 {
                    let ahead = rpc.callsPerSecond / grpc.callsPerSecond
                    verdicts.append(
                        "goal rpc ahead of gRPC C++ at \(label): \(String(format: "%.2f", ahead))x its calls/s \(ahead > 1 ? "met" : "NOT met")"
                    )
                }
                if callers == 16 {
                    let p99 = rpc.percentileMilliseconds(0.99)
                    verdicts.append(
                        "goal rpc p99 < 1 ms at \(label): \(String(format: "%.3f", p99)) ms \(p99 < 1 ? "met" : "NOT met")"
                    )
                }
            }
        }
        printTable(
            [
                "payload", "callers", "raw calls/s", "raw p50 ms", "raw p99 ms", "rpc calls/s", "rpc p50 ms",
                "rpc p99 ms", "rpc/raw",
                "raw cpu µs/call", "rpc cpu µs/call", "grpc calls/s", "grpc p99 ms", "grpc cpu µs/call",
                "rpc/grpc calls/s",
                "rpc/grpc cpu", "http+json calls/s", "http+json p99 ms", "http+json cpu µs/call", "http/rpc calls/s",
                "tls calls/s", "tls p99 ms", "tls cpu µs/call", "tls-rpc cpu µs/call", "aes-gcm µs/call",
            ], rows)
        for verdict in verdicts { print(verdict) }
        rawClient.close()
        rpcClient.close()
        httpClient.close()
        tlsClient.close()
        await tlsServer.shutdown(grace: .seconds(1))
        certificates.remove()
        rawServer.shutdown()
        await rpcServer.shutdown(grace: .seconds(1))
    }
}

/// `64 B`, `64 KiB`.
func sizeLabel(_ bytes: Int) -> String {
    bytes >= 1024 && bytes % 1024 == 0 ? "\(bytes / 1024) KiB" : "\(bytes) B"
}

/// A CA and a server and client certificate for the TLS row, made by the `openssl` program.
struct BenchCertificates {
    let directory: String
    var ca: String { "\(directory)/ca.pem" }
    var server: (certificate: String, key: String) { ("\(directory)/server.pem", "\(directory)/server.key") }
    var client: (certificate: String, key: String) { ("\(directory)/client.pem", "\(directory)/client.key") }

    init() throws {
        directory = NSTemporaryDirectory() + "menagerie-bench-tls-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: "\(directory)/ext", atomically: true, encoding: .utf8)
        _ = try Self.openssl(
            ["req", "-x509"] + ec + [
                "-keyout", "\(directory)/ca.key", "-out", ca, "-days", "2", "-subj", "/CN=bench CA",
            ])
        for name in ["server", "client"] {
            _ = try Self.openssl(
                ["req"] + ec + [
                    "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).csr", "-subj", "/CN=\(name)",
                ])
            _ = try Self.openssl([
                "x509", "-req", "-in", "\(directory)/\(name).csr", "-CA", ca, "-CAkey", "\(directory)/ca.key",
                "-CAcreateserial",
                "-days", "2", "-extfile", "\(directory)/ext", "-out", "\(directory)/\(name).pem",
            ])
        }
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// AES-128-GCM's speed on one core in bytes per second: `MENAGERIE_AES_GCM_BYTES_PER_SECOND`, else the
    /// issue's figure for this machine (`openssl speed -evp aes-128-gcm`: 2.9 GB/s). Not run from here: the
    /// benchmark's threads block SIGALRM, which `openssl speed` inherits and needs to stop.
    static func aesGCMBytesPerSecond() -> Double? {
        ProcessInfo.processInfo.environment["MENAGERIE_AES_GCM_BYTES_PER_SECOND"].flatMap(Double.init) ?? 2.9e9
    }

    static func openssl(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw RPCError(.internalError, "openssl \(arguments.first ?? "") failed")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

import Foundation
import RPC
import RPCTesting
import RPCWire
import Schema
import Transport

/// Unary echo over loopback through the whole RPC stack, beside a raw framed TCP echo on the same
/// event loop library (no envelope, no protobuf, no worker pool) measured in the same run, and the
/// same call as a browser makes it: Connect unary JSON over HTTP/1.1 on the same port (`HTTPEchoClient`,
/// one kept-alive connection per caller).
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

    func run() async throws {
        let duration = Duration.milliseconds(Int64(secondsPerRun * 1000))
        let rawServer = try RawEchoServer()
        let rpcServer = try TCPServer(rpc: RPCServer(name: "bench", services: [EchoService()]), port: 0)
        let rawClient = try await RawEchoClient(endpoint: rawServer.address)
        let rpcClient = RPCClient(transports: [try TCPClientTransport(endpoint: rpcServer.address)])
        let httpClient = try await HTTPEchoClient(endpoint: rpcServer.address, connections: callerCounts.max() ?? 1)
        print("RPC benchmark: unary echo over loopback, \(rounds) rounds of \(secondsPerRun)s per configuration, \(ProcessInfo.processInfo.activeProcessorCount) cores")
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
                for _ in 0..<rounds {
                    if includeFloor {
                        raws.append(try await Measurement.run(callers: callers, duration: duration) { _ = try await rawClient.echo(payload) })
                    }
                    rpcs.append(try await Measurement.run(callers: callers, duration: duration) {
                        _ = try await rpcClient.unary(RpcV1.Echo.echo, request)
                    })
                    https.append(try await Measurement.run(callers: callers, duration: duration) {
                        _ = try await httpClient.echo(request)
                    })
                }
                let grpc = peer?.measure(size: size, callers: callers, rounds: rounds, seconds: secondsPerRun)
                let raw = includeFloor ? Measurement.combining(raws) : Measurement()
                let rpc = Measurement.combining(rpcs)
                let http = Measurement.combining(https)
                let ratio = includeFloor ? median(zip(rpcs, raws).map { $1.callsPerSecond > 0 ? $0.callsPerSecond / $1.callsPerSecond : 0 }) : 0
                rows.append([
                    sizeLabel(size), "\(callers)",
                    String(format: "%.0f", raw.callsPerSecond), String(format: "%.3f", raw.percentileMilliseconds(0.5)),
                    String(format: "%.3f", raw.percentileMilliseconds(0.99)),
                    String(format: "%.0f", rpc.callsPerSecond), String(format: "%.3f", rpc.percentileMilliseconds(0.5)),
                    String(format: "%.3f", rpc.percentileMilliseconds(0.99)), String(format: "%.2f", ratio),
                    String(format: "%.1f", raw.cpuMicrosPerCall), String(format: "%.1f", rpc.cpuMicrosPerCall),
                    grpc.map { String(format: "%.0f", $0.callsPerSecond) } ?? "-", grpc.map { String(format: "%.3f", $0.p99Milliseconds) } ?? "-",
                    grpc.map { String(format: "%.1f", $0.cpuMicrosPerCall) } ?? "-",
                    grpc.map { String(format: "%.2f", rpc.callsPerSecond / $0.callsPerSecond) } ?? "-",
                    grpc.map { String(format: "%.2f", rpc.cpuMicrosPerCall / $0.cpuMicrosPerCall) } ?? "-",
                    String(format: "%.0f", http.callsPerSecond), String(format: "%.3f", http.percentileMilliseconds(0.99)),
                    String(format: "%.1f", http.cpuMicrosPerCall),
                    String(format: "%.2f", median(zip(https, rpcs).map { $1.callsPerSecond > 0 ? $0.callsPerSecond / $1.callsPerSecond : 0 })),
                ])
                let label = "\(sizeLabel(size)), \(callers) callers"
                if callers == 64 {
                    verdicts.append("goal rpc/raw calls/s >= 0.50 at \(label): \(String(format: "%.2f", ratio)) \(ratio >= 0.5 ? "met" : "NOT met")")
                }
                if let grpc, size >= 64 << 10 {
                    let ahead = rpc.callsPerSecond / grpc.callsPerSecond
                    verdicts.append("goal rpc ahead of gRPC C++ at \(label): \(String(format: "%.2f", ahead))x its calls/s \(ahead > 1 ? "met" : "NOT met")")
                }
                if callers == 16 {
                    let p99 = rpc.percentileMilliseconds(0.99)
                    verdicts.append("goal rpc p99 < 1 ms at \(label): \(String(format: "%.3f", p99)) ms \(p99 < 1 ? "met" : "NOT met")")
                }
            }
        }
        printTable(
            ["payload", "callers", "raw calls/s", "raw p50 ms", "raw p99 ms", "rpc calls/s", "rpc p50 ms", "rpc p99 ms", "rpc/raw",
             "raw cpu µs/call", "rpc cpu µs/call", "grpc calls/s", "grpc p99 ms", "grpc cpu µs/call", "rpc/grpc calls/s",
             "rpc/grpc cpu", "http+json calls/s", "http+json p99 ms", "http+json cpu µs/call", "http/rpc calls/s"], rows)
        for verdict in verdicts { print(verdict) }
        rawClient.close()
        rpcClient.close()
        httpClient.close()
        rawServer.shutdown()
        await rpcServer.shutdown(grace: .seconds(1))
    }
}

/// `64 B`, `64 KiB`.
func sizeLabel(_ bytes: Int) -> String {
    bytes >= 1024 && bytes % 1024 == 0 ? "\(bytes / 1024) KiB" : "\(bytes) B"
}

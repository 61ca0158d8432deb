import Foundation
import RPC
import RPCTesting
import RPCWire
import Transport

/// A fixed number of unary echo calls, server and client in separate processes, for profilers that count
/// instructions (`valgrind --tool=callgrind`) or syscalls (`strace -c`): wall-clock figures mean nothing on
/// a shared machine, instruction counts do. The server prints its address and serves until killed; the
/// client makes `calls` calls of `size` bytes from `callers` concurrent callers and exits, so the client's
/// cost per call is the difference of two runs with different counts, and the server's the difference of
/// two `callgrind_control --dump`s around a run.
///
///     rpc-profile server [--tls DIR]
///     rpc-profile client HOST:PORT CALLS CALLERS SIZE [--tls DIR]
///
/// DIR holds ca.pem and server.pem/.key, client.pem/.key (as `menagerie-bench` makes them).
///
/// `main` is synchronous and blocks its thread in `sleep` or a semaphore (the calls run detached, off the
/// main actor that thread is): under valgrind 3.19 an async
/// main's thread (`dispatch_main`'s `sigsuspend`) crashes the tool.
@main
struct RPCProfile {
    static func main() throws {
        var arguments = Array(CommandLine.arguments.dropFirst())
        var tlsDirectory: String?
        if let index = arguments.firstIndex(of: "--tls"), index + 1 < arguments.count {
            tlsDirectory = arguments[index + 1]
            arguments.removeSubrange(index...(index + 1))
        }
        switch arguments.first {
        case "server":
            let server = TCPServer(port: 0)
            if let tlsDirectory {
                server.serveTLS(
                    try .server(
                        certificateFile: "\(tlsDirectory)/server.pem", keyFile: "\(tlsDirectory)/server.key",
                        caFile: "\(tlsDirectory)/ca.pem"))
            }
            try RPCServer(name: "profile", services: [EchoService()]).serve(over: server)
            FileHandle.standardOutput.write(Data("\(server.address)\n".utf8))
            while true { sleep(3600) }
        case "client" where arguments.count == 5:
            guard let calls = Int(arguments[2]), let callers = Int(arguments[3]), let size = Int(arguments[4]),
                callers > 0
            else {
                fatalError("client HOST:PORT CALLS CALLERS SIZE")
            }
            let tls = try tlsDirectory.map { directory in
                try TLSCredentials.client(
                    certificateFile: "\(directory)/client.pem", keyFile: "\(directory)/client.key",
                    caFile: "\(directory)/ca.pem")
            }
            let client = RPCClient(transports: [try TCPClientTransport(endpoint: arguments[1], tls: tls)])
            let request = RpcV1.EchoRequest(payload: [UInt8](repeating: 0xAB, count: size))
            let done = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var failure: (any Error)?
            Task.detached {
                defer { done.signal() }
                do { try await call(client, request, calls: calls, callers: callers, size: size) } catch {
                    failure = error
                }
            }
            done.wait()
            if let failure { throw failure }
        default:
            print("usage: rpc-profile server [--tls DIR] | client HOST:PORT CALLS CALLERS SIZE [--tls DIR]")
        }
    }

    static func call(_ client: RPCClient, _ request: RpcV1.EchoRequest, calls: Int, callers: Int, size: Int)
        async throws
    {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for caller in 0..<callers {
                let share = calls / callers + (caller < calls % callers ? 1 : 0)
                group.addTask {
                    for _ in 0..<share {
                        let response = try await client.unary(RpcV1.Echo.echo, request)
                        precondition(response.payload.count == size)
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}

import RPC
import RPCWire
import Schema

/// Echoes payloads back, in all four call kinds: for tests and benchmarks, registered on request.
public struct EchoService: RPCService {
    public init() {}

    public func register(in router: inout RPCRouter) {
        router.unary(RpcV1.Echo.echo) { request, context in
            try await Self.pause(request)
            try Self.failIfAsked(request)
            return RpcV1.EchoResponse(payload: request.payload, index: 0)
        }
        router.serverStreaming(RpcV1.Echo.stream) { request, writer, context in
            for index in 0..<request.count {
                try await Self.pause(request)
                try context.checkAlive()
                try await writer.send(RpcV1.EchoResponse(payload: request.payload, index: index))
            }
            try Self.failIfAsked(request)
        }
        router.clientStreaming(RpcV1.Echo.collect) { requests, context in
            var payload: [UInt8] = []
            var count: UInt32 = 0
            for try await request in requests {
                try await Self.pause(request)
                try Self.failIfAsked(request)
                payload += request.payload
                count += 1
            }
            return RpcV1.EchoResponse(payload: payload, index: count)
        }
        router.bidirectionalStreaming(RpcV1.Echo.chat) { requests, writer, context in
            var index: UInt32 = 0
            for try await request in requests {
                for _ in 0..<max(1, request.count) {
                    try await Self.pause(request)
                    try context.checkAlive()
                    try await writer.send(RpcV1.EchoResponse(payload: request.payload, index: index))
                    index += 1
                }
                try Self.failIfAsked(request)
            }
        }
    }

    private static func pause(_ request: RpcV1.EchoRequest) async throws {
        if request.delayMs > 0 { try await Task.sleep(for: .milliseconds(Int(request.delayMs))) }
    }

    private static func failIfAsked(_ request: RpcV1.EchoRequest) throws {
        if request.failWithCode != 0 {
            throw RPCError(StatusCode(rawValue: request.failWithCode), "failed as asked")
        }
    }
}

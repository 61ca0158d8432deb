import RPC
import RPCTestSupport
import RPCTesting
import RPCWire
import Schema
import Testing

/// protobuf-c keeps strings as C strings, so a NUL inside one would cut it on the way out: `a\0b` sent as `a`.
/// Decoding refuses such text on every door; encoding must not change it silently either — a handler's answer
/// holding one fails the call (INTERNAL, through the handler's error path), and a client's request is refused
/// before it is sent (INVALID_ARGUMENT), on every kind of call.
@Suite struct NULEncodingTests {
    /// Answers with a service named as the request's payload says.
    static let name = ProtoMethod<RpcV1.EchoRequest, RpcV1.ServiceInfo>(
        path: "/test.Nul/Name", serverStreaming: false, idempotent: true, access: .public)
    /// Takes a service's name, answers its bytes.
    static let take = ProtoMethod<RpcV1.ServiceInfo, RpcV1.EchoResponse>(
        path: "/test.Nul/Take", serverStreaming: false, idempotent: true, access: .public)
    /// Streams the bytes of the service's name, once.
    static let spell = ProtoMethod<RpcV1.ServiceInfo, RpcV1.EchoResponse>(
        path: "/test.Nul/Spell", serverStreaming: true, idempotent: false, access: .public)
    /// Takes services' names, answers their bytes joined.
    static let gather = ProtoMethod<RpcV1.ServiceInfo, RpcV1.EchoResponse>(
        path: "/test.Nul/Gather", clientStreaming: true, serverStreaming: false, idempotent: false, access: .public)

    struct Names: RPCService {
        func register(in router: inout RPCRouter) {
            router.unary(NULEncodingTests.name) { request, _ in
                RpcV1.ServiceInfo(name: String(decoding: request.payload, as: UTF8.self))
            }
            router.unary(NULEncodingTests.take) { request, _ in RpcV1.EchoResponse(payload: Array(request.name.utf8)) }
            router.serverStreaming(NULEncodingTests.spell) { request, writer, _ in
                try await writer.send(RpcV1.EchoResponse(payload: Array(request.name.utf8)))
            }
            router.clientStreaming(NULEncodingTests.gather) { requests, _ in
                var joined: [UInt8] = []
                for try await request in requests { joined += Array(request.name.utf8) }
                return RpcV1.EchoResponse(payload: joined)
            }
        }
    }

    @Test func aMessageWithANULInAStringIsRefusedNotCut() throws {
        #expect(throws: SchemaError.self) { try RpcV1.ServiceInfo(name: "a\u{0}b").serializedBytesRefusingNUL() }
        let whole = try RpcV1.ServiceInfo(name: "ab").serializedBytesRefusingNUL()
        #expect(try RpcV1.ServiceInfo(serializedBytes: whole).name == "ab")
    }

    @Test(arguments: TransportKind.allCases)
    func anAnswerHoldingANULFailsTheCallInsteadOfAnsweringItCut(kind: TransportKind) async throws {
        try await Harness.with(kind, services: [Names()]) { harness in
            #expect(
                try await harness.client.unary(Self.name, RpcV1.EchoRequest(payload: Array("ab".utf8))).name == "ab")
            await #expect(throws: RPCError.self) {
                let reply = try await harness.client.unary(Self.name, RpcV1.EchoRequest(payload: Array("a\u{0}b".utf8)))
                Issue.record("answered \(reply.name.debugDescription)")
            }
            do {
                _ = try await harness.client.unary(Self.name, RpcV1.EchoRequest(payload: Array("a\u{0}b".utf8)))
            } catch let error as RPCError {
                #expect(error.code == .internalError)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aRequestHoldingANULIsRefusedBeforeItIsSent(kind: TransportKind) async throws {
        try await Harness.with(kind, services: [Names()]) { harness in
            do {
                let reply = try await harness.client.unary(Self.take, RpcV1.ServiceInfo(name: "le\u{0}v"))
                Issue.record("the server took \(String(decoding: reply.payload, as: UTF8.self).debugDescription)")
            } catch let error as RPCError {
                #expect(error.code == .invalidArgument)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aServerStreamingRequestHoldingANULIsRefusedBeforeItIsSent(kind: TransportKind) async throws {
        try await Harness.with(kind, services: [Names()]) { harness in
            var spelt: [[UInt8]] = []
            for try await reply in harness.client.serverStreaming(Self.spell, RpcV1.ServiceInfo(name: "ab")) {
                spelt.append(reply.payload)
            }
            #expect(spelt == [Array("ab".utf8)])
            await expectStatus(.invalidArgument) {
                for try await reply in harness.client.serverStreaming(Self.spell, RpcV1.ServiceInfo(name: "le\u{0}v")) {
                    Issue.record("the server took \(String(decoding: reply.payload, as: UTF8.self).debugDescription)")
                }
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aStreamedRequestHoldingANULIsRefusedBeforeItIsSent(kind: TransportKind) async throws {
        try await Harness.with(kind, services: [Names()]) { harness in
            let whole = try await harness.client.clientStreaming(Self.gather) { writer in
                try await writer.send(RpcV1.ServiceInfo(name: "a"))
                try await writer.send(RpcV1.ServiceInfo(name: "b"))
            }
            #expect(whole.payload == Array("ab".utf8))
            await expectStatus(.invalidArgument) {
                let reply = try await harness.client.clientStreaming(Self.gather) { writer in
                    try await writer.send(RpcV1.ServiceInfo(name: "a"))
                    try await writer.send(RpcV1.ServiceInfo(name: "le\u{0}v"))
                }
                Issue.record("the server took \(String(decoding: reply.payload, as: UTF8.self).debugDescription)")
            }
        }
    }
}

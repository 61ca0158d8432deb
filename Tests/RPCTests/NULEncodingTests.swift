import RPC
import RPCTestSupport
import RPCTesting
import RPCWire
import Schema
import Testing

/// protobuf-c keeps strings as C strings, so a NUL inside one would cut it on the way out: `a\0b` sent as `a`.
/// Decoding refuses such text on every door; encoding must not change it silently either — a handler's answer
/// holding one fails the call (INTERNAL, through the handler's error path), and a client's request is refused
/// before it is sent (INVALID_ARGUMENT).
@Suite struct NULEncodingTests {
    /// Answers with a service named as the request's payload says.
    static let name = ProtoMethod<RpcV1.EchoRequest, RpcV1.ServiceInfo>(
        path: "/test.Nul/Name", serverStreaming: false, idempotent: true, access: .public)
    /// Takes a service's name, answers its bytes.
    static let take = ProtoMethod<RpcV1.ServiceInfo, RpcV1.EchoResponse>(
        path: "/test.Nul/Take", serverStreaming: false, idempotent: true, access: .public)

    struct Names: RPCService {
        func register(in router: inout RPCRouter) {
            router.unary(NULEncodingTests.name) { request, _ in RpcV1.ServiceInfo(name: String(decoding: request.payload, as: UTF8.self)) }
            router.unary(NULEncodingTests.take) { request, _ in RpcV1.EchoResponse(payload: Array(request.name.utf8)) }
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
            #expect(try await harness.client.unary(Self.name, RpcV1.EchoRequest(payload: Array("ab".utf8))).name == "ab")
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
}

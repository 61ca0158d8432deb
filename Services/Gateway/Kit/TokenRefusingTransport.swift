import RPC

/// A transport to an address a token must not reach unencrypted: a call carrying `authorization` fails before it is
/// sent (FAILED_PRECONDITION, saying why and what to do); calls without one go through. Whatever the token's source —
/// the gateway's credentials or a command's own (`health --token`) — the check is on what would leave.
struct TokenRefusingTransport: ClientTransport {
    let wrapped: any ClientTransport
    let reason: String

    init(_ wrapped: any ClientTransport, reason: String) {
        self.wrapped = wrapped
        self.reason = reason
    }

    var endpoint: String { wrapped.endpoint }
    var isAvailable: Bool { wrapped.isAvailable }

    func unary(_ head: CallHead, request: [UInt8]) async throws -> [UInt8] {
        if carriesToken(head) { throw RPCError(.failedPrecondition, reason) }
        return try await wrapped.unary(head, request: request)
    }

    func stream(_ head: CallHead, request: [UInt8]?) -> any ClientCall {
        carriesToken(head)
            ? RefusedCall(error: RPCError(.failedPrecondition, reason)) : wrapped.stream(head, request: request)
    }

    func close() { wrapped.close() }

    private func carriesToken(_ head: CallHead) -> Bool { head.metadata["authorization"] != nil }
}

import Schema

/// How a door's request bytes become the method's protobuf request: inflated, and transcoded from JSON. A door that
/// receives something other than our frames' protobuf (Connect's gzip bodies and JSON) hands its call to the server
/// with a decoder rather than decoding itself, and the server runs it on the call's worker once the guard admitted the
/// caller (`RPCServer.serve`): nothing a client sends is inflated or parsed before it is known who sends it, nor on an
/// event loop, where a 61 KB body inflating to 63 MB of JSON held a turn for 23 s.
///
/// The decoder belongs to the door (it knows its encodings and its memory budget); the server gives it the method, so
/// it can bound what it inflates by the method's own request limit and find the method's JSON mapping.
package struct RequestDecoder: Sendable {
    /// What a decoder knows of the method whose request it decodes.
    package struct Method: Sendable {
        package let info: ProtoMethodInfo
        /// The method's JSON mapping (nil: it has none, and a JSON request cannot be served).
        package let json: JSONTranscoder?
    }

    private let body: @Sendable ([UInt8], Method) throws(RPCError) -> [UInt8]

    package init(_ body: @escaping @Sendable (_ bytes: [UInt8], _ method: Method) throws(RPCError) -> [UInt8]) {
        self.body = body
    }

    /// The protobuf bytes of the request `bytes`, or the error the call answers with (INVALID_ARGUMENT for what does not
    /// decode, RESOURCE_EXHAUSTED for what the method's limit or the memory budget cannot hold).
    package func decode(_ bytes: [UInt8], for method: Method) throws(RPCError) -> [UInt8] {
        try body(bytes, method)
    }
}

extension ProtoMethodInfo {
    /// The most a request of this method may be once decoded: its proto's `max_request_bytes` within the door's own
    /// limit `transportLimit` (a search takes 64 KiB, so a body inflating to 60 MiB stops inflating there).
    package func requestLimit(within transportLimit: Int) -> Int {
        min(transportLimit, maxRequestBytes ?? transportLimit)
    }
}

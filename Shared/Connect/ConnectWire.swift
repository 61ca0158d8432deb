import Base
import HTTP
import RPC
import Schema
import ServerSeam
import Synchronization
import TCP

/// The encoding half of Connect on the server: a call's status becomes its HTTP response, a
/// stream's messages its envelopes. Any thread; one call's writes come in order (its sink's turn),
/// and the exchanges' lock orders them against the status the loop may write (deadline).
package struct ConnectWire<Stream: ByteStream>: CallWire {
    package let stream: Stream
    package let exchanges: ConnectExchanges

    /// No HTTP client grants credit: responses are paced by the socket alone (`waitUntilWritable`).
    package var clientGrantsResponseCredit: Bool { false }

    package func writeStatus(_ id: UInt64, message: [UInt8]?, error: RPCError?) {
        let keepAlive = exchanges.end(id) { exchange in
            if exchange.streaming {
                stream.send(bytes: exchange.streamEnd(message: message, error: error))
            } else {
                stream.send(exchange.unaryResponse(message: message, error: error), closing: !exchange.keepAlive)
            }
        }
        guard let keepAlive else { return }
        exchanges.onAnswered?(keepAlive)
    }

    package func writeMessage(_ id: UInt64, _ chunk: [UInt8], continues: Bool) {
        exchanges.update(id) { exchange in
            guard let bytes = exchange.streamMessage(chunk, continues: continues) else { return }
            stream.send(bytes: bytes)
        }
    }

    package func writeRequestCredit(_ id: UInt64, bytes: Int) {
        exchanges.grantRequestCredit(id, bytes)
    }
}

/// The requests being answered on one connection, by call id: how each wants its answer; and the
/// credit of the client stream being read.
package final class ConnectExchanges: @unchecked Sendable {
    private let open = Mutex<[UInt64: ConnectExchange]>([:])
    /// Credit the inbox of the client stream being read has left, as `MessageInbox` counts it.
    private let requestCredit = Mutex<(id: UInt64, credit: Int)>((0, 0))
    /// Called once an answer is queued, with whether the connection stays open; set before any call.
    package var onAnswered: (@Sendable (Bool) -> Void)?
    /// Called when the inbox of the client stream being read granted credit; set before any call.
    package var onCredit: (@Sendable () -> Void)?

    package func begin(_ id: UInt64, _ exchange: ConnectExchange) {
        open.withLock { $0[id] = exchange }
    }

    /// Ends exchange `id`, writing its last bytes with `write` under the lock (so nothing of the call
    /// follows them); its keep-alive, or nil when it was over already.
    package func end(_ id: UInt64, _ write: (inout ConnectExchange) -> Void) -> Bool? {
        open.withLock { open -> Bool? in
            guard var exchange = open.removeValue(forKey: id) else { return nil }
            write(&exchange)
            return exchange.keepAlive
        }
    }

    package func update(_ id: UInt64, _ body: (inout ConnectExchange) -> Void) {
        open.withLock { open in
            guard open[id] != nil else { return }
            body(&open[id]!)
        }
    }

    package func isOpen(_ id: UInt64) -> Bool { open.withLock { $0[id] != nil } }

    package var openIDs: [UInt64] { open.withLock { Array($0.keys).sorted() } }

    /// Client stream `id` starts with the inbox's whole window.
    package func resetRequestCredit(_ id: UInt64) {
        requestCredit.withLock { $0 = (id, FlowControl.initialWindow) }
    }

    /// Takes `cost` of client stream `id`'s credit when there is that much.
    package func spendRequestCredit(_ id: UInt64, _ cost: Int) -> Bool {
        requestCredit.withLock { state in
            guard state.id == id, state.credit >= cost else { return false }
            state.credit -= cost
            return true
        }
    }

    package func grantRequestCredit(_ id: UInt64, _ bytes: Int) {
        let granted = requestCredit.withLock { state -> Bool in
            guard state.id == id else { return false }
            state.credit += bytes
            return true
        }
        if granted { onCredit?() }
    }
}

/// How one request wants its answer.
package struct ConnectExchange: Sendable {
    /// Where a call's answer goes to be sent again (`AnswerCache`).
    package struct Kept: Sendable {
        let cache: AnswerCache
        let key: AnswerCache.Key
        let version: Int64
    }

    package var encoding: ConnectProtocol.Encoding
    package var json: JSONTranscoder?
    package var gzip = false
    package var origin: String?
    package var keepAlive: Bool
    package var unknownMethod = false
    /// A GET: the answer carries an ETag and cache headers, and `ifNoneMatch` may make it a 304.
    package var cacheable = false
    package var ifNoneMatch: String?
    /// Where this call's answer is kept once made, and the data version it is made from.
    package var kept: Kept?
    /// A streaming call: answered 200 with a body of envelopes, `chunked` (else delimited by the close).
    package var streaming = false
    package var chunked = true
    /// The stream's head was written; a message arriving in chunks is joined here.
    private var headSent = false
    private var partial: [UInt8] = []
    /// The stream failed while writing (a response that did not map to JSON): its end is written.
    private var ended = false

    init(
        encoding: ConnectProtocol.Encoding, json: JSONTranscoder? = nil, gzip: Bool = false, origin: String?,
        keepAlive: Bool,
        unknownMethod: Bool = false, cacheable: Bool = false, ifNoneMatch: String? = nil, streaming: Bool = false,
        chunked: Bool = true,
        kept: Kept? = nil
    ) {
        self.kept = kept
        self.streaming = streaming
        self.chunked = chunked
        self.encoding = encoding
        self.json = json
        self.gzip = gzip
        self.origin = origin
        self.keepAlive = keepAlive
        self.unknownMethod = unknownMethod
        self.cacheable = cacheable
        self.ifNoneMatch = ifNoneMatch
    }

    /// The response of a unary call: its message in the request's encoding, or its error as
    /// Connect's JSON error body with the status Connect maps its code to. A successful answer of a
    /// call whose answers are kept (`kept`) is kept, as it is before a 304 and CORS.
    package func unaryResponse(message: [UInt8]?, error: RPCError?) -> HTTPResponse {
        if let error { return finished(ConnectProtocol.errorResponse(error, status: unknownMethod ? 404 : nil)) }
        var body = message ?? []
        if encoding == .json {
            do {
                guard let json else { throw RPCError(.internalError, "the method has no JSON mapping") }
                body = try json.response(body)
            } catch {
                return finished(ConnectProtocol.errorResponse(failing: error))
            }
        }
        var response = HTTPResponse(status: 200, headers: ["Content-Type": encoding.contentType], body: body)
        if cacheable {
            response.headers.add("ETag", ConnectProtocol.entityTag(body))
            response.headers.add("Cache-Control", "private, no-cache")
        }
        if gzip, body.count >= ConnectProtocol.compressionThreshold {
            response.body = Gzip.compress(body)
            response.headers.add("Content-Encoding", "gzip")
        }
        if let kept { kept.cache.keep(response, for: kept.key, madeAt: kept.version) }
        return answer(ok: response)
    }

    /// A successful answer as this request gets it: 304 when a GET's `If-None-Match` holds its tag, and CORS.
    package func answer(ok response: HTTPResponse) -> HTTPResponse {
        if cacheable, let ifNoneMatch, let tag = response.headers["etag"], ConnectProtocol.matches(ifNoneMatch, tag) {
            var headers = response.headers
            headers.remove("Content-Encoding")
            return finished(HTTPResponse(status: 304, headers: headers))
        }
        return finished(response)
    }

    // MARK: Streams

    /// The bytes of one message of a stream (`continues`: a chunk of it, more follow), with the
    /// response's head before the first; nil while a message is being joined, or the stream ended.
    package mutating func streamMessage(_ chunk: [UInt8], continues: Bool) -> [UInt8]? {
        guard !ended else { return nil }
        if continues || !partial.isEmpty {
            partial += chunk
            guard !continues else { return nil }
        }
        var message = partial.isEmpty ? chunk : partial
        partial = []
        if encoding == .json {
            do {
                guard let json else { throw RPCError(.internalError, "the method has no JSON mapping") }
                message = try json.response(message)
            } catch {
                ended = true
                let failure = (error as? RPCError) ?? RPCError(.internalError, "internal error")
                return streamHeadIfNeeded() + endEnvelope(failure)
            }
        }
        if gzip, message.count >= ConnectProtocol.compressionThreshold {
            return streamHeadIfNeeded()
                + framed(ConnectProtocol.envelope(flags: ConnectProtocol.compressedFlag, Gzip.compress(message)))
        }
        return streamHeadIfNeeded() + framed(ConnectProtocol.envelope(flags: 0, message))
    }

    /// The last bytes of a stream: its head if no message came, the client stream's one response,
    /// the end-of-stream envelope, the last chunk.
    package mutating func streamEnd(message: [UInt8]?, error: RPCError?) -> [UInt8] {
        guard !ended else { return chunked ? HTTPResponse.lastChunk : [] }
        var error = error
        var bytes: [UInt8] = []
        if let message, error == nil, let written = streamMessage(message, continues: false) {
            bytes += written
            if ended { return bytes + (chunked ? HTTPResponse.lastChunk : []) }
        }
        if error == nil, !partial.isEmpty { error = RPCError(.internalError, "the stream ended inside a message") }
        return streamHeadIfNeeded() + bytes + endEnvelope(error) + (chunked ? HTTPResponse.lastChunk : [])
    }

    private func endEnvelope(_ error: RPCError?) -> [UInt8] {
        framed(ConnectProtocol.envelope(flags: ConnectProtocol.endStreamFlag, ConnectProtocol.endOfStream(error)))
    }

    private func framed(_ bytes: [UInt8]) -> [UInt8] { chunked ? HTTPResponse.chunk(bytes) : bytes }

    private mutating func streamHeadIfNeeded() -> [UInt8] {
        guard !headSent else { return [] }
        headSent = true
        var response = finished(HTTPResponse(status: 200, headers: ["Content-Type": encoding.streamContentType]))
        // Envelopes at or above the threshold are compressed, each flagged; smaller ones go as they are.
        if gzip { response.headers.add("Connect-Content-Encoding", "gzip") }
        if !chunked { return response.headLines(closing: true) }
        return response.chunkedHead(closing: !keepAlive)
    }

    private func finished(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        ConnectProtocol.addCORS(to: &response.headers, origin: origin)
        if cacheable || gzip { response.headers.add("Vary", "Accept-Encoding, Origin") }
        return response
    }
}

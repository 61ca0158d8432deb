import RPC
import RPCWire
import Schema
import ServerSeam
import TCP
import TLSStreams

/// Our binary framing on the server, the decoding half: decodes the frames its `FrameReader` cuts
/// from the stream into the operations of the connection's calls (`ConnectionCalls`: the server core's table,
/// through the seam), and answers the
/// protocol errors it finds; `FrameWire` is the encoding half. Generic over the stream, so a TLS
/// stream later (or a test's stream) is served by this same code.
///
/// Loop thread.
package final class FrameServerConnection<Stream: ByteStream, Calls: ConnectionCalls>: ServerConnection {
    let stream: Stream
    package let socket: TCPConnection
    /// The server that accepted it.
    let host: any ConnectionHost
    /// The stream read as our frames, once its first byte says it speaks them.
    let frames: FrameReader<Stream>
    /// The connection's calls, served by the server core.
    let calls: Calls
    /// The highest call id the client has used, and CANCELs that arrived for ids above it: a
    /// cancel that overtook its request. Bounded by the concurrent-call limit.
    private var highestID: UInt64 = 0
    private var cancelledAhead = Set<UInt64>()
    package var uncounted = false
    /// The client certificate's subject on a TLS stream, read once (its first call comes after the handshake).
    private lazy var peerCertificate: String? = (stream as? TLSStream)?.peerCertificate?.subject

    /// Serves `stream`, carried by `socket` (the same object for plain TCP), for `host`, its calls those `calls`
    /// makes for its wire.
    package init(
        stream: Stream, socket: TCPConnection, host: any ConnectionHost, calls makeCalls: (FrameWire<Stream>) -> Calls
    ) {
        self.stream = stream
        self.socket = socket
        self.host = host
        calls = makeCalls(FrameWire(stream: stream))
        frames = FrameReader(stream, maxFrameSize: host.limits.maxFrameSize)
        frames.onFrame = { [unowned self] in received($0) }
        frames.onFramesEnd = { [unowned calls] in calls.startQueued() }
        frames.onFrameError = { [unowned self] error in frameError(error) }
    }

    package var lastFrameAt: ContinuousClock.Instant? { frames.lastFrameAt }
    package var partialFrameSince: ContinuousClock.Instant? { frames.partialFrameSince }
    package var openCalls: Int { calls.openCalls }
    package var hasMadeCalls: Bool { calls.hasMadeCalls }
    package var openUploads: Int { calls.openUploads }
    package func endStalledUploads(now: ContinuousClock.Instant) { calls.endStalledUploads(now: now) }

    package func picked(_ kind: ProtocolSniffer.Kind) {
        switch kind {
        case .frames:
            stream.reader = frames
        case .http:
            break  // served by ConnectServerConnection (see SniffedConnection)
        case .tls:
            refuseProtocol(TLSStream.notServed, "a TLS client, and this server serves plaintext only (no --tls-cert)")
        }
    }

    /// A plaintext client of a server that serves TLS only: told so (`message`) in its protocol (an UNAUTHENTICATED
    /// status frame, or HTTP's 400 as nginx answers plain HTTP on an HTTPS port), then closed.
    package func refusePlaintext(_ kind: ProtocolSniffer.Kind, message: String) {
        switch kind {
        case .http:
            let body = Array((message + "\n").utf8)
            let head =
                "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
            refuseProtocol(Array(head.utf8) + body, "a plaintext HTTP client, and this server serves TLS only")
        default:
            stream.reader = nil
            fail(.unauthenticated, message)
        }
    }

    /// Answers a client of another protocol with `reply` (its protocol's own refusal) and closes once
    /// that is written, lingering like any closing connection.
    private func refuseProtocol(_ reply: [UInt8], _ reason: String) {
        stream.reader = nil
        stream.send(bytesOfSize: reply.count, sealing: true) { destination in
            reply.withUnsafeBytes { destination.copyMemory(from: $0) }
        }
        stream.close(afterFlushing: reason)
        if !socket.isClosed { host.release(self) }
    }

    package func fail(_ code: StatusCode, _ message: String) {
        stream.loop.assertInLoop()
        guard !stream.isClosing, !stream.isClosed else { return }
        // Sealed as it is queued: an answer a worker writes now would otherwise follow it, and the
        // client would take that answer for the connection's last word (AbuseTests saw it).
        stream.send(FrameWire<Stream>.statusFrame(0, message: nil, error: RPCError(code, message)), sealing: true)
        calls.cancelAll()
        stream.close(afterFlushing: message)
        if !socket.isClosed { host.release(self) }
    }

    package func closed(reason: String) { calls.closed(reason: reason) }

    // MARK: Frames from the client

    private func received(_ bytes: UnsafeRawBufferPointer) {
        stream.loop.assertInLoop()
        guard !bytes.isEmpty else {
            fail(.internalError, "protocol error: zero-length frame")
            return
        }
        let frame: RpcV1.Frame
        do {
            frame = try RpcV1.Frame(envelopeKeepingNUL: bytes)
        } catch {
            fail(.internalError, "protocol error: the envelope does not decode (\(error))")
            return
        }
        switch frame.kind {
        case .request: open(frame)
        case .message: calls.receiveMessage(frame.callID, frame.payload, continues: frame.continues)
        case .endStream: calls.endRequests(frame.callID)
        case .windowUpdate: calls.grantResponseCredit(frame.callID, bytes: Int(frame.windowIncrement))
        case .cancel: cancel(frame.callID)
        case .status: fail(.internalError, "protocol error: a client may not send STATUS frames")
        default: fail(.internalError, "protocol error: unknown frame kind \(frame.kind.rawValue)")
        }
    }

    private func open(_ frame: RpcV1.Frame) {
        let id = frame.callID
        guard id != 0 else {
            fail(.internalError, "protocol error: call id 0 is reserved")
            return
        }
        if id > highestID { highestID = id }
        if !cancelledAhead.isEmpty, cancelledAhead.remove(id) != nil {
            // Its CANCEL overtook it: the client has given up on it already (and gets no answer,
            // as for a call cancelled while it waited for a worker).
            return
        }
        if FrameEnvelope.containsNUL(frame.method)
            || frame.metadata.contains(where: {
                FrameEnvelope.containsNUL($0.key) || FrameEnvelope.containsNUL($0.value)
            })
        {
            calls.refuse(
                id, CallHead(method: frame.method, peer: stream.peer),
                RPCError(.invalidArgument, "the method name or metadata contains a NUL character"))
            return
        }
        let head = CallHead(
            method: frame.method, metadata: Metadata(frame.metadata.map { ($0.key, $0.value) }),
            deadline: frame.timeoutMicros.map { .now + .microseconds(Int64(clamping: $0)) }, peer: stream.peer,
            peerCertificate: peerCertificate)
        switch calls.open(id, head, clientStreams: frame.clientStream, payload: frame.payload) {
        case .opened: break
        case .idInUse:
            // As HTTP/2 treats a reused stream id: an error of the connection. The earlier call is
            // cancelled and gets no answer, so the client cannot take this error for its result.
            fail(.internalError, "protocol error: call id \(id) is already open")
        }
    }

    private func cancel(_ id: UInt64) {
        if !calls.cancel(id), id > highestID, cancelledAhead.count < host.limits.maxConcurrentCalls {
            // Ids above every one used so far name calls still to come: this cancel overtook its request.
            cancelledAhead.insert(id)
        }
    }

    private func frameError(_ error: FrameError) {
        switch error {
        case .tooLarge:
            fail(.resourceExhausted, error.description)
        case .overBudget(let length):
            fail(.resourceExhausted, error.description)
            host.shedLargest(atLeast: length, sparing: self)
        case .unsupportedFlags:
            fail(.internalError, "protocol error: \(error.description)")
        }
    }
}

/// Our binary framing on the server, the encoding half: each answer is one `RpcV1.Frame`, encoded
/// straight into the stream's outbox.
package struct FrameWire<Stream: ByteStream>: CallWire {
    package let stream: Stream

    package func writeStatus(_ id: UInt64, message: [UInt8]?, error: RPCError?) {
        stream.send(Self.statusFrame(id, message: message, error: error))
    }

    package func writeMessage(_ id: UInt64, _ chunk: [UInt8], continues: Bool) {
        stream.send(RpcV1.Frame(callID: id, kind: .message, hasPayload: true, payload: chunk, continues: continues))
    }

    package func writeRequestCredit(_ id: UInt64, bytes: Int) {
        stream.send(RpcV1.Frame(callID: id, kind: .windowUpdate, windowIncrement: UInt32(clamping: bytes)))
    }

    package static func statusFrame(_ id: UInt64, message: [UInt8]?, error: RPCError?) -> RpcV1.Frame {
        RpcV1.Frame(
            callID: id, kind: .status, hasPayload: message != nil, payload: message ?? [],
            statusCode: error?.code.rawValue ?? 0, statusMessage: error?.message ?? "")
    }
}

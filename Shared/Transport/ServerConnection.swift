import RPC
import RPCWire
import Schema
import TCP
import TLS
import TLSStreams

/// What the listener (`TCPServer`) needs of a connection it serves, whatever protocol it speaks and
/// whatever stream carries it: its socket (limits, memory budget, closing), how long it has been
/// quiet, and how to tell it to go. Seen once per sweep or accept, never per frame.
protocol ServerConnection: AnyObject {
    /// The TCP connection underneath, which the listener accepted and counts.
    var socket: TCPConnection { get }
    /// When the last complete frame (request) arrived, and since when an unfinished one has waited.
    var lastFrameAt: ContinuousClock.Instant? { get }
    var partialFrameSince: ContinuousClock.Instant? { get }
    var openCalls: Int { get }
    /// Whether the client ever started a call here.
    var hasMadeCalls: Bool { get }
    /// Uploads (client-streaming calls) open here.
    var openUploads: Int { get }
    /// Ends the uploads that went quiet or too slow (`TCPServer.Limits.uploadIdleTimeout`, `uploadMinimumRate`).
    func endStalledUploads(now: ContinuousClock.Instant)
    /// No longer counted against the server's connection limits (see `TCPServer.uncount`).
    var uncounted: Bool { get set }
    /// The connection's first byte says it speaks `kind`: it reads that protocol from now on, or is
    /// answered and closed when the protocol is not served here.
    func picked(_ kind: ProtocolSniffer.Kind)
    /// A connection-level error: tells the client why in its protocol, cancels every call, closes
    /// once that is written.
    func fail(_ code: StatusCode, _ message: String)
    /// The socket closed: its calls end.
    func closed(reason: String)
}

extension ServerConnection {
    /// Whether it is being closed (told why, flushing and lingering).
    var isFailing: Bool { socket.closingSince != nil }
}

/// A connection whose first byte picks its protocol: our frames until then (which also answer a
/// refused client), the Connect protocol once it says HTTP, a TLS session when it begins with a
/// handshake and the server has certificates (then served by a connection of the same kind over the
/// `TLSStream`, whose protocol ALPN picks). The listener sees this one object whichever it is, once
/// per sweep or accept, so the forwarding costs no frame anything.
final class SniffedConnection<Stream: ByteStream>: ServerConnection {
    private let stream: Stream
    private let server: TCPServer
    private let frames: FrameServerConnection<Stream>
    private var http: ConnectServerConnection<Stream>?
    private var tls: SniffedConnection<TLSStream>?
    private var served: any ServerConnection {
        if let tls { return tls }
        if let http { return http }
        return frames
    }

    init(stream: Stream, socket: TCPConnection, server: TCPServer) {
        self.stream = stream
        self.server = server
        frames = FrameServerConnection(stream: stream, socket: socket, server: server)
    }

    var socket: TCPConnection { frames.socket }
    var lastFrameAt: ContinuousClock.Instant? { served.lastFrameAt }
    var partialFrameSince: ContinuousClock.Instant? { served.partialFrameSince }
    var openCalls: Int { served.openCalls }
    var hasMadeCalls: Bool { served.hasMadeCalls }
    var openUploads: Int { served.openUploads }
    func endStalledUploads(now: ContinuousClock.Instant) { served.endStalledUploads(now: now) }
    /// The protocol's own flag, which it sets when it uncounts itself while closing.
    var uncounted: Bool {
        get { served.uncounted }
        set { served.uncounted = newValue }
    }

    func picked(_ kind: ProtocolSniffer.Kind) {
        // Inside TLS, ALPN picked the protocol; on the socket, a TLS server takes nothing else.
        let isPlaintext = Stream.self != TLSStream.self
        if isPlaintext, server.tls != nil, kind != .tls { return frames.refusePlaintext(kind) }
        switch kind {
        case .frames:
            frames.picked(kind)
        case .http:
            let connect = ConnectServerConnection(stream: stream, socket: frames.socket, server: server)
            http = connect
            connect.start()
        case .tls:
            guard isPlaintext, let credentials = server.tls else { return frames.picked(kind) }
            startTLS(credentials.context)
        }
    }

    /// Serves the socket as a TLS session: once the handshake is done, ALPN names the protocol (ours
    /// when the client offered none, as the context then required its certificate too).
    private func startTLS(_ context: TLSContext) {
        let secure: TLSStream
        do {
            secure = try TLSStream(socket: frames.socket, context: context)
        } catch {
            return frames.fail(.internalError, "cannot start TLS: \(error)")
        }
        let inner = SniffedConnection<TLSStream>(stream: secure, socket: frames.socket, server: server)
        tls = inner
        secure.onEstablished = { [unowned inner] _, chosen in
            inner.picked(chosen == TLSCredentials.httpProtocol ? .http : .frames)
        }
    }

    func fail(_ code: StatusCode, _ message: String) { served.fail(code, message) }
    func closed(reason: String) { served.closed(reason: reason) }
}

/// Our binary framing on the server, the decoding half: decodes the frames its `FrameReader` cuts
/// from the stream into the operations of the connection's `ServerCallTable`, and answers the
/// protocol errors it finds; `FrameWire` is the encoding half. Generic over the stream, so a TLS
/// stream later (or a test's stream) is served by this same code.
///
/// Loop thread.
final class FrameServerConnection<Stream: ByteStream>: ServerConnection {
    let stream: Stream
    let socket: TCPConnection
    let server: TCPServer
    /// The stream read as our frames, once its first byte says it speaks them.
    let frames: FrameReader<Stream>
    /// The connection's calls.
    let calls: ServerCallTable<FrameWire<Stream>>
    /// The highest call id the client has used, and CANCELs that arrived for ids above it: a
    /// cancel that overtook its request. Bounded by the concurrent-call limit.
    private var highestID: UInt64 = 0
    private var cancelledAhead = Set<UInt64>()
    var uncounted = false
    /// The client certificate's subject on a TLS stream, read once (its first call comes after the handshake).
    private lazy var peerCertificate: String? = (stream as? TLSStream)?.peerCertificate?.subject

    /// Serves `stream`, carried by `socket` (the same object for plain TCP), for `server`.
    init(stream: Stream, socket: TCPConnection, server: TCPServer) {
        self.stream = stream
        self.socket = socket
        self.server = server
        calls = ServerCallTable(wire: FrameWire(stream: stream), server: server, queue: CallQueue(connection: socket))
        frames = FrameReader(stream, maxFrameSize: server.limits.maxFrameSize)
        frames.onFrame = { [unowned self] in received($0) }
        frames.onFramesEnd = { [unowned calls] in calls.startQueued() }
        frames.onFrameError = { [unowned self] error in frameError(error) }
    }

    var lastFrameAt: ContinuousClock.Instant? { frames.lastFrameAt }
    var partialFrameSince: ContinuousClock.Instant? { frames.partialFrameSince }
    var openCalls: Int { calls.openCalls }
    var hasMadeCalls: Bool { calls.hasMadeCalls }
    var openUploads: Int { calls.openUploads }
    func endStalledUploads(now: ContinuousClock.Instant) { calls.endStalledUploads(now: now) }

    func picked(_ kind: ProtocolSniffer.Kind) {
        switch kind {
        case .frames:
            stream.reader = frames
        case .http:
            break  // served by ConnectServerConnection (see SniffedConnection)
        case .tls:
            refuseProtocol(TLSStream.notServed, "a TLS client, and this server serves plaintext only (no --tls-cert)")
        }
    }

    /// A plaintext client of a server that serves TLS only: told so in its protocol (an UNAUTHENTICATED
    /// status frame, or HTTP's 400 as nginx answers plain HTTP on an HTTPS port), then closed.
    func refusePlaintext(_ kind: ProtocolSniffer.Kind) {
        let message = "\(server.rpc.name) at \(server.address) accepts TLS connections only: connect with TLS (the gateway's --tls-ca, --tls-cert and --tls-key, or https://)"
        let client = kind == .http ? "HTTP" : "binary"
        server.refusals.warning(server.logger, kind: "plaintext \(client)", "refused a plaintext \(client) client from \(stream.peer): this server accepts TLS connections only")
        switch kind {
        case .http:
            let body = Array((message + "\n").utf8)
            let head = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
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
        if !socket.isClosed { server.uncount(self) }
    }

    func fail(_ code: StatusCode, _ message: String) {
        stream.loop.assertInLoop()
        guard !stream.isClosing, !stream.isClosed else { return }
        // Sealed as it is queued: an answer a worker writes now would otherwise follow it, and the
        // client would take that answer for the connection's last word (AbuseTests saw it).
        stream.send(FrameWire<Stream>.statusFrame(0, message: nil, error: RPCError(code, message)), sealing: true)
        calls.cancelAll()
        stream.close(afterFlushing: message)
        if !socket.isClosed { server.uncount(self) }
    }

    func closed(reason: String) { calls.closed(reason: reason) }

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
            || frame.metadata.contains(where: { FrameEnvelope.containsNUL($0.key) || FrameEnvelope.containsNUL($0.value) }) {
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
        if !calls.cancel(id), id > highestID, cancelledAhead.count < server.limits.maxConcurrentCalls {
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
            server.shedLargest(atLeast: length, sparing: self)
        case .unsupportedFlags:
            fail(.internalError, "protocol error: \(error.description)")
        }
    }
}

/// Our binary framing on the server, the encoding half: each answer is one `RpcV1.Frame`, encoded
/// straight into the stream's outbox.
struct FrameWire<Stream: ByteStream>: CallWire {
    let stream: Stream

    func writeStatus(_ id: UInt64, message: [UInt8]?, error: RPCError?) {
        stream.send(Self.statusFrame(id, message: message, error: error))
    }

    func writeMessage(_ id: UInt64, _ chunk: [UInt8], continues: Bool) {
        stream.send(RpcV1.Frame(callID: id, kind: .message, hasPayload: true, payload: chunk, continues: continues))
    }

    func writeRequestCredit(_ id: UInt64, bytes: Int) {
        stream.send(RpcV1.Frame(callID: id, kind: .windowUpdate, windowIncrement: UInt32(clamping: bytes)))
    }

    static func statusFrame(_ id: UInt64, message: [UInt8]?, error: RPCError?) -> RpcV1.Frame {
        RpcV1.Frame(
            callID: id, kind: .status, hasPayload: message != nil, payload: message ?? [],
            statusCode: error?.code.rawValue ?? 0, statusMessage: error?.message ?? "")
    }
}

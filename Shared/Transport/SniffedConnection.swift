import Connect
import Framing
import RPC
import RPCWire
import Schema
import ServerCore
import ServerSeam
import TCP
import TLS
import TLSStreams

/// A connection whose first byte picks its protocol: our frames until then (which also answer a
/// refused client), the Connect protocol once it says HTTP, a TLS session when it begins with a
/// handshake and the server has certificates (then served by a connection of the same kind over the
/// `TLSStream`, whose protocol ALPN picks). The listener sees this one object whichever it is, once
/// per sweep or accept, so the forwarding costs no frame anything.
final class SniffedConnection<Stream: ByteStream>: ServerConnection {
    /// Each protocol's connection, its calls the server core's table.
    typealias Frames = FrameServerConnection<Stream, ServerCallTable>
    typealias Connect = ConnectServerConnection<Stream, ServerCallTable>

    private let stream: Stream
    private let server: TCPServer
    private let frames: Frames
    private var http: Connect?
    private var tls: SniffedConnection<TLSStream>?
    private var served: any ServerConnection {
        if let tls { return tls }
        if let http { return http }
        return frames
    }

    init(stream: Stream, socket: TCPConnection, server: TCPServer) {
        self.stream = stream
        self.server = server
        frames = Frames(stream: stream, socket: socket, host: server) { server.calls(over: $0, socket: socket) }
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
        if isPlaintext, server.tls != nil, kind != .tls { return refusePlaintext(kind) }
        switch kind {
        case .frames:
            frames.picked(kind)
        case .http:
            let socket = frames.socket
            let connect = Connect(stream: stream, socket: socket, host: server, face: server.face) {
                server.calls(over: $0, socket: socket)
            }
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

    /// A plaintext client of a server that serves TLS only: told so in its protocol, then closed (logged once a
    /// minute per kind: a client can cause it at will).
    private func refusePlaintext(_ kind: ProtocolSniffer.Kind) {
        let message =
            "\(server.rpc.name) at \(server.address) accepts TLS connections only: connect with TLS (the gateway's --tls-ca, --tls-cert and --tls-key, or https://)"
        let client = kind == .http ? "HTTP" : "binary"
        server.refusals.warning(
            server.logger, kind: "plaintext \(client)",
            "refused a plaintext \(client) client from \(stream.peer): this server accepts TLS connections only")
        frames.refusePlaintext(kind, message: message)
    }

    func fail(_ code: StatusCode, _ message: String) { served.fail(code, message) }
    func closed(reason: String) { served.closed(reason: reason) }
}

import Foundation

/// A TCP socket to 127.0.0.1 speaking raw bytes, to play a misbehaving client. Its blocking calls
/// run off the cooperative pool.
public final class RawSocket: @unchecked Sendable {
    private let descriptor: Int32

    /// Connects to 127.0.0.1:`port`; throws when nothing listens there.
    public init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            close(descriptor)
            throw POSIXError(.ECONNREFUSED)
        }
        setReceiveTimeout(Self.defaultReceiveTimeout)
    }

    /// How long a read waits unless told otherwise: 10 s, stretched on a busy machine (`TestTime`).
    public static var defaultReceiveTimeout: Duration { TestTime.scaled(.seconds(10)) }

    deinit { close(descriptor) }

    /// How long a read waits before it gives up (`defaultReceiveTimeout` unless set).
    public func setReceiveTimeout(_ timeout: Duration) {
        let micros = timeout.components.seconds * 1_000_000 + timeout.components.attoseconds / 1_000_000_000_000
        var value = timeval(tv_sec: Int(micros / 1_000_000), tv_usec: Int(micros % 1_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends bytes; false once the peer has closed.
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// Closes the sending side (the peer reads end-of-stream, as when a client closes), keeping the socket to read.
    public func finishWriting() {
        shutdown(descriptor, Int32(SHUT_WR))
    }

    /// Reads until the peer closes (or the receive timeout passes); returns what arrived and whether it closed.
    public func readUntilClosed() async -> (bytes: [UInt8], closed: Bool) {
        let descriptor = descriptor
        return
            (try? await offPool {
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                    if count == 0 { return (received, true) }
                    if count < 0 { return (received, errno == ECONNRESET) }
                    received += buffer[0..<count]
                }
            }) ?? ([], false)
    }

    /// Reads exactly `count` bytes; nil when the peer closes first or the receive timeout passes.
    public func read(count: Int) async -> [UInt8]? {
        try? await offPool { [self] in readBlocking(count: count) } ?? nil
    }

    /// Reads exactly `count` bytes, blocking the calling thread (use it off the cooperative pool,
    /// in `offPool`); nil when the peer closes first or the receive timeout passes.
    public func readBlocking(count: Int) -> [UInt8]? {
        var received = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = received.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress! + filled, count - filled, 0) }
            if got <= 0 { return nil }
            filled += got
        }
        return received
    }

    /// Connects to `port`, sends `bytes` and closes; nothing happens when nobody listens.
    public static func sendAndClose(_ bytes: [UInt8], to port: Int) {
        (try? RawSocket(port: port))?.write(bytes)
    }

    /// Whether nothing listens on 127.0.0.1:`port` now (it can be bound).
    public static func isFree(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = loopback(port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }

    /// A port p such that p…p+count-1 are all free now and none is within `count` of `taken`. The block lies
    /// below the kernel's ephemeral range (and so do its cluster ports, 1000 above): a port in that range can be
    /// taken after this check by any process's outgoing connection — an OCR replica scaled onto such a port found
    /// it held for a minute in CI. Those cluster ports are free too, and no block nor its cluster ports overlap
    /// another's (`taken`'s) block or cluster ports: CI once gave ocr the block 1000 below health's, and ocr's cluster
    /// members could not listen on health's service ports.
    public static func freePortBlock(count: Int, avoiding taken: [Int] = []) throws -> Int {
        let highest = ephemeralPortRangeStart() - count - 1_001
        for _ in 0..<200 {
            let base = Int.random(in: 10_000...max(10_000, highest))
            if taken.contains(where: { other in [0, 1_000, -1_000].contains { abs(other + $0 - base) < count } }) {
                continue
            }
            if (base..<(base + count)).allSatisfy(isFree), (base + 1_000..<(base + 1_000 + count)).allSatisfy(isFree) {
                return base
            }
        }
        throw POSIXError(.EADDRINUSE)
    }

    /// The lowest port the kernel hands to outgoing connections (32768 when it cannot be read).
    static func ephemeralPortRangeStart() -> Int {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        return range.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32_768
    }

    private static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}

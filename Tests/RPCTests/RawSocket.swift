import Foundation

/// A blocking TCP socket speaking raw bytes, to play a misbehaving client.
final class RawSocket {
    private let descriptor: Int32

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw POSIXError(.ECONNREFUSED) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(descriptor) }

    /// Sends bytes; false once the peer has closed.
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// Reads until the peer closes (or 10 s pass); returns what arrived and whether it closed.
    func readUntilClosed() -> (bytes: [UInt8], closed: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (received, true) }
            if count < 0 { return (received, errno == ECONNRESET) }
            received += buffer[0..<count]
        }
    }
}

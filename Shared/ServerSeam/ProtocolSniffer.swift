import TCP

/// The server's first reader on every connection: picks the protocol from the first byte, hands
/// the connection to it, and gives it that byte and the rest.
///
/// One byte tells them apart: our frames begin with their flag byte, 0x00; a TLS connection with a
/// handshake record, 0x16; HTTP/1.1 with a method name, and HTTP/2 with its preface (`PRI * HTTP/2.0`),
/// both ASCII capitals. Our frames and HTTP/1.1 (the Connect protocol, `ConnectServerConnection`) are
/// served, and TLS when the server has certificates (`TLSStream`); without them a TLS client gets a
/// fatal alert and a clean close, so it neither waits for a frame timeout nor reads garbage. Any other
/// byte is handed to our framing, which answers it as the protocol error it is.
package final class ProtocolSniffer: ConnectionReader {
    /// What a connection's first byte says it speaks.
    package enum Kind: Equatable {
        case frames, http, tls

        package init(firstByte: UInt8) {
            switch firstByte {
            case 0x16: self = .tls
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): self = .http
            default: self = .frames
            }
        }
    }

    /// Made once per connection, so the stream's type is erased here without cost to any frame.
    private unowned let connection: any ByteStream
    /// Gives the connection to the protocol of `kind`: makes it the connection's `reader`, or answers
    /// and closes it. Bytes go to the new reader, if any, when it returns.
    private let pick: (Kind) -> Void

    package init(_ connection: any ByteStream, pick: @escaping (Kind) -> Void) {
        self.connection = connection
        self.pick = pick
    }

    package var readsInBulk: Bool { false }
    package var budgetedBytes: Int { 0 }
    package func releaseBudget() {}

    package func received(_ bytes: UnsafeRawBufferPointer) {
        guard let first = bytes.first else { return }
        // `pick` replaces this reader, whose last reference the connection held.
        withExtendedLifetime(self) { pick(Kind(firstByte: first)) }
        guard let next = connection.reader, next !== self, !connection.isClosing, !connection.isClosed else { return }
        next.received(bytes)
    }
}

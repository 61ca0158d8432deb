import Base

/// The protocol layer of a connection: what reads the bytes its `ByteStream` receives. Our binary
/// framing is one (`FrameReader`); the server's first reader picks the protocol (`ProtocolSniffer`),
/// so HTTP later is one more reader on the same connections and port. A stream that transforms
/// bytes (TLS) is its inner stream's reader and forwards these to its own. Loop thread only.
package protocol ConnectionReader: AnyObject {
    /// Bytes arrived; they are valid only during the call.
    func received(_ bytes: UnsafeRawBufferPointer)
    /// Whether reads feed one large message (a large frame): such reads share the loop's bulk budget.
    var readsInBulk: Bool { get }
    /// Bytes of the server's memory budget this reader holds (a large frame arriving).
    var budgetedBytes: Int { get }
    /// The connection lingers or closes: what it holds of the memory budget goes back.
    func releaseBudget()
    /// Memory the next read may fill directly, when this reader would only copy what arrives there (the rest of a
    /// large frame); the read then ends in `receivedInPlace` instead of `received`. Nil: read into the loop's buffer.
    func readDestination() -> UnsafeMutableRawBufferPointer?
    /// `count` bytes were read into the memory `readDestination` gave.
    func receivedInPlace(_ count: Int)
}

extension ConnectionReader {
    package func readDestination() -> UnsafeMutableRawBufferPointer? { nil }
    package func receivedInPlace(_ count: Int) { preconditionFailure("\(Self.self) gives no read destination") }
}

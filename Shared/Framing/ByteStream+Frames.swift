import RPCWire
import Schema
import TCP

extension ByteStream {
    /// Queues a frame whose `size`-byte envelope `write` puts straight into the outbox (no copy in
    /// between); safe from any thread. A `sealing` frame is the last (see `send(bytesOfSize:sealing:_:)`).
    package func send(envelopeOfSize size: Int, sealing: Bool = false, _ write: (UnsafeMutableRawBufferPointer) -> Void)
    {
        send(bytesOfSize: FrameCodec.headerSize + size, sealing: sealing) { frame in
            FrameCodec.writeHeader(length: size, to: frame.baseAddress!)
            write(UnsafeMutableRawBufferPointer(rebasing: frame[FrameCodec.headerSize...]))
        }
    }

    /// Queues one envelope for writing as a frame; safe from any thread.
    package func send(envelope: [UInt8]) {
        envelope.withUnsafeBytes { source in
            send(envelopeOfSize: source.count) { destination in
                if let base = source.baseAddress {
                    destination.baseAddress!.copyMemory(from: base, byteCount: source.count)
                }
            }
        }
    }

    /// Queues `frame` as one frame: the frame header and the envelope's fields are written straight into the outbox,
    /// and the payload after them, handed to the socket as it is where the stream can (`send(headOfSize:...)`). The
    /// last one when `sealing`. Safe from any thread.
    package func send(_ frame: RpcV1.Frame, sealing: Bool = false) {
        let head = FrameEnvelope.headSize(of: frame)
        let tail = FrameEnvelope.tailSize(of: frame)
        send(
            headOfSize: FrameCodec.headerSize + head, body: frame.payload, tailOfSize: tail, sealing: sealing,
            { destination in
                FrameCodec.writeHeader(length: head + frame.payload.count + tail, to: destination.baseAddress!)
                FrameEnvelope.encodeHead(
                    frame, into: UnsafeMutableRawBufferPointer(rebasing: destination[FrameCodec.headerSize...]))
            }, { FrameEnvelope.encodeTail(frame, into: $0) })
    }
}

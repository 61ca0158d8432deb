import TestSupport
import Testing

@testable import Connect
@testable import Framing
@testable import ServerCore
@testable import ServerSeam
@testable import TCP
@testable import TLSStreams
@testable import Transport

@Suite struct FrameCodecTests {
    @Test func encodesHeaderAsFlagAndBigEndianLength() {
        let frame = FrameCodec.encode(Array(repeating: 7, count: 258))
        #expect(Array(frame.prefix(5)) == [0, 0, 0, 1, 2])
        #expect(frame.count == 263)
    }

    @Test func decodesFramesArrivingOneByteAtATime() throws {
        let envelopes: [[UInt8]] = [[1, 2, 3], [], Array(repeating: 9, count: 1000)]
        let stream = envelopes.flatMap(FrameCodec.encode)
        let decoder = FrameDecoder()
        var decoded: [[UInt8]] = []
        for byte in stream {
            decoder.append([byte])
            while let envelope = try decoder.next() { decoded.append(envelope) }
        }
        #expect(decoded == envelopes)
        #expect(!decoder.hasPartialFrame)
    }

    @Test func decodesManyFramesInOneRead() throws {
        let decoder = FrameDecoder()
        decoder.append((0..<50).flatMap { FrameCodec.encode([UInt8($0)]) })
        var count = 0
        while let envelope = try decoder.next() {
            #expect(envelope == [UInt8(count)])
            count += 1
        }
        #expect(count == 50)
    }

    @Test func framesOfEverySizeSurviveArbitraryReadBoundaries() throws {
        // Small and large frames (past the buffer the decoder keeps between reads) cut into random
        // pieces, as TCP may deliver them; the decoder compacts and regrows its buffer meanwhile.
        var generator = SeededGenerator(seed: 42)
        let sizes = [0, 1, 100, 70_000, 5, 300_000, 17, 1 << 20, 3]
        let envelopes = sizes.map { size in (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ size) } }
        let stream = envelopes.flatMap(FrameCodec.encode)
        let decoder = FrameDecoder()
        var decoded: [[UInt8]] = []
        var offset = 0
        while offset < stream.count {
            let piece = min(stream.count - offset, Int(generator.next() % 200_000) + 1)
            decoder.append(Array(stream[offset..<offset + piece]))
            offset += piece
            while let envelope = try decoder.next() { decoded.append(envelope) }
        }
        #expect(decoded == envelopes)
        #expect(decoder.bufferedByteCount == 0)
    }

    /// What a connection does with a large frame's rest (`roomForRestOfFrame`): reads it straight into the decoder's
    /// buffer, never past the frame's end, while what follows still arrives by `append`.
    @Test func theRestOfALargeFrameIsReadInPlace() throws {
        var generator = SeededGenerator(seed: 7)
        let sizes = [70_000, 3, 20_000, 1 << 20, 0, 16_383, 200_000]
        let envelopes = sizes.map { size in (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ size) } }
        let stream = envelopes.flatMap(FrameCodec.encode)
        let decoder = FrameDecoder()
        var decoded: [[UInt8]] = []
        var offset = 0
        var inPlace = 0
        while offset < stream.count {
            let piece = min(stream.count - offset, Int(generator.next() % 100_000) + 1)
            if let room = decoder.roomForRestOfFrame(atLeast: 16 * 1024) {
                let count = min(piece, room.count)
                stream[offset..<offset + count].withUnsafeBytes {
                    room.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: count)
                }
                decoder.didAppendInPlace(count)
                offset += count
                inPlace += count
            } else {
                decoder.append(Array(stream[offset..<offset + piece]))
                offset += piece
            }
            while let envelope = try decoder.next() { decoded.append(envelope) }
        }
        #expect(decoded == envelopes)
        #expect(inPlace > 1 << 20, "most of the large frames' bytes went in place")
        #expect(decoder.roomForRestOfFrame(atLeast: 1) == nil, "no frame is under way")
    }

    @Test func truncatedFrameStaysPartial() throws {
        let decoder = FrameDecoder()
        decoder.append(Array(FrameCodec.encode([1, 2, 3, 4]).dropLast()))
        #expect(try decoder.next() == nil)
        #expect(decoder.hasPartialFrame)
    }

    @Test func rejectsLengthOverTheLimitBeforeTheBodyArrives() {
        let decoder = FrameDecoder(maxFrameSize: 1024)
        decoder.append([0, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: FrameError.tooLarge(length: 0xFFFF_FFFF, limit: 1024)) { try decoder.next() }
    }

    @Test func rejectsCompressedOrUnknownFlags() {
        let decoder = FrameDecoder()
        decoder.append([1, 0, 0, 0, 0])
        #expect(throws: FrameError.unsupportedFlags(1)) { try decoder.next() }
    }
}

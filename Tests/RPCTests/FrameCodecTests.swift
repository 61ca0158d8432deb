import Testing
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
        var decoder = FrameDecoder()
        var decoded: [[UInt8]] = []
        for byte in stream {
            decoder.append([byte])
            while let envelope = try decoder.next() { decoded.append(envelope) }
        }
        #expect(decoded == envelopes)
        #expect(!decoder.hasPartialFrame)
    }

    @Test func decodesManyFramesInOneRead() throws {
        var decoder = FrameDecoder()
        decoder.append((0..<50).flatMap { FrameCodec.encode([UInt8($0)]) })
        var count = 0
        while let envelope = try decoder.next() {
            #expect(envelope == [UInt8(count)])
            count += 1
        }
        #expect(count == 50)
    }

    @Test func truncatedFrameStaysPartial() throws {
        var decoder = FrameDecoder()
        decoder.append(Array(FrameCodec.encode([1, 2, 3, 4]).dropLast()))
        #expect(try decoder.next() == nil)
        #expect(decoder.hasPartialFrame)
    }

    @Test func rejectsLengthOverTheLimitBeforeTheBodyArrives() {
        var decoder = FrameDecoder(maxFrameSize: 1024)
        decoder.append([0, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: FrameError.tooLarge(length: 0xFFFF_FFFF, limit: 1024)) { try decoder.next() }
    }

    @Test func rejectsCompressedOrUnknownFlags() {
        var decoder = FrameDecoder()
        decoder.append([1, 0, 0, 0, 0])
        #expect(throws: FrameError.unsupportedFlags(1)) { try decoder.next() }
    }
}

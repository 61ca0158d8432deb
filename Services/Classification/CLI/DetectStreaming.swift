import ClassificationAPI
import Foundation
import GatewayKit
import RPC
import Schema

/// `gateway classify detect --stream DIR|-`: frames to `DetectStream` as fast as they come (or at `--fps`), one
/// JSON line per answer on standard output, and on a terminal the frames per second on standard error. Sending
/// and reading run at once, so a slow model makes the service drop stale frames rather than hold up the camera.
enum DetectStreaming {
    /// Where frames come from: image files in name order, or an MJPEG stream (concatenated JPEGs, as `ffmpeg … -f
    /// mjpeg -` writes) on standard input.
    enum Source {
        case directory(String)
        case standardInput

        init(_ argument: String) throws {
            if argument == "-" {
                self = .standardInput
                return
            }
            try InputFile.check(argument, directory: true, role: "--stream")
            self = .directory(argument)
        }
    }

    /// The frame files of a directory, in name order: PNG and JPEG by extension; none is an error.
    static func frameFiles(_ directory: String) throws -> [String] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { photoExtensions.contains(($0 as NSString).pathExtension.lowercased()) }
            .sorted()
        guard !names.isEmpty else {
            throw FileError(.missing, path: directory, reason: "no PNG or JPEG frames in it", role: "--stream")
        }
        return names.map { (directory as NSString).appendingPathComponent($0) }
    }

    static func run(
        client: ClassificationV1.Classification.Client, source: Source, template: ClassificationV1.DetectRequest,
        fps: Double?, options: CallOptions
    ) async throws {
        let started = ContinuousClock.now
        let showRate = isatty(STDERR_FILENO) == 1
        let interval: Duration? = fps.map { .nanoseconds(Int64(1e9 / $0)) }
        let answered = try await client.detectStream(
            options: options,
            requests: { writer in
                var number: UInt64 = 0
                func send(_ image: [UInt8]) async throws {
                    number += 1
                    var request = template
                    request.image = image
                    try await writer.send(ClassificationV1.DetectStreamRequest(request: request, frame: number))
                    if let interval {
                        try await Task.sleep(until: started + interval * Int(number), clock: .continuous)
                    }
                }
                switch source {
                case .directory(let directory):
                    for file in try frameFiles(directory) { try await send(readFile(file)) }
                case .standardInput:
                    var splitter = MJPEGSplitter()
                    while let chunk = try await readStandardInput() {
                        for frame in try splitter.feed(chunk) { try await send(frame) }
                    }
                    try splitter.finish()
                }
            },
            responses: { responses in
                let meter = ProgressDisplay()
                var count = 0
                for try await answer in responses {
                    count += 1
                    // Unbuffered: a reader of the pipe gets each answer as it comes.
                    FileHandle.standardOutput.write(Data((answer.outputJSON.serialized(.compact) + "\n").utf8))
                    if showRate {
                        let seconds = Self.seconds(ContinuousClock.now - started)
                        meter.update(
                            fraction: 0,
                            message: String(
                                format: "frame %llu: %.1f fps, %llu dropped", answer.frame,
                                Double(count) / max(seconds, 1e-3), answer.droppedTotal))
                    }
                }
                if showRate { meter.finish() }
                return count
            })
        if showRate {
            writeStandardError(
                String(format: "%d frames answered in %.1f s\n", answered, Self.seconds(ContinuousClock.now - started)))
        }
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// Up to 64 KiB of standard input; nil at its end. Read on a thread of its own, so the call's tasks go on.
    static func readStandardInput() async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                let n = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
                if n < 0 {
                    continuation.resume(
                        throwing: FileError(
                            .unreadable, path: "-", reason: String(cString: strerror(errno)), role: "--stream"))
                } else {
                    continuation.resume(returning: n == 0 ? nil : Array(buffer.prefix(n)))
                }
            }
        }
    }
}

/// Cuts an MJPEG byte stream — JPEG images one after another, perhaps with other bytes between them (a multipart
/// boundary) — into its JPEGs. A JPEG is followed marker by marker: segments are skipped by their length, so an EXIF
/// thumbnail's own end marker does not end the frame, and after start-of-scan the entropy-coded data runs to the
/// first marker that is neither a stuffed 0xFF00 nor a restart marker; the frame ends at end-of-image (0xFFD9).
struct MJPEGSplitter {
    private var buffer: [UInt8] = []
    /// Frames larger than this are refused: a stream that never ends its JPEG would grow without bound.
    static let maximumFrameBytes = 64 << 20

    struct Malformed: Error, CustomStringConvertible {
        let description: String
    }

    mutating func feed(_ bytes: [UInt8]) throws -> [[UInt8]] {
        buffer += bytes
        var frames: [[UInt8]] = []
        while true {
            // Skip to the next start-of-image.
            guard let start = Self.find(buffer, [0xFF, 0xD8, 0xFF], from: 0) else {
                // Keep a possible partial marker at the end.
                buffer = Array(buffer.suffix(2))
                return frames
            }
            if start > 0 { buffer.removeFirst(start) }
            guard let end = try Self.endOfImage(buffer) else {
                guard buffer.count <= Self.maximumFrameBytes else {
                    throw Malformed(
                        description:
                            "an MJPEG frame runs past \(Self.maximumFrameBytes >> 20) MiB without its end marker")
                }
                return frames
            }
            frames.append(Array(buffer[..<end]))
            buffer.removeFirst(end)
        }
    }

    /// At the stream's end: a JPEG begun and not finished is an error (a cut frame).
    func finish() throws {
        if Self.find(buffer, [0xFF, 0xD8, 0xFF], from: 0) != nil {
            throw Malformed(description: "the MJPEG stream ended inside a frame")
        }
    }

    /// The index just past the JPEG starting at 0, or nil while it is incomplete.
    static func endOfImage(_ b: [UInt8]) throws -> Int? {
        var i = 2
        while true {
            // A marker: 0xFF (fill bytes allowed), then its code.
            guard i < b.count else { return nil }
            guard b[i] == 0xFF else { throw Malformed(description: "not a JPEG marker at byte \(i) of an MJPEG frame") }
            while i < b.count, b[i] == 0xFF { i += 1 }
            guard i < b.count else { return nil }
            let code = b[i]
            i += 1
            switch code {
            case 0xD9: return i
            case 0x01, 0xD0...0xD7: continue  // no length
            default:
                guard i + 1 < b.count else { return nil }
                let length = Int(b[i]) << 8 | Int(b[i + 1])
                guard length >= 2 else {
                    throw Malformed(description: "a JPEG segment of length \(length) in an MJPEG frame")
                }
                i += length
                guard code == 0xDA else { continue }
                // Entropy-coded data: to the next marker that is not stuffing or a restart.
                while true {
                    guard i + 1 < b.count else { return nil }
                    if b[i] == 0xFF, b[i + 1] != 0x00, !(0xD0...0xD7).contains(b[i + 1]), b[i + 1] != 0xFF { break }
                    i += 1
                }
            }
        }
    }

    static func find(_ haystack: [UInt8], _ needle: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var i = start
        while i + needle.count <= haystack.count {
            if haystack[i] == needle[0], Array(haystack[i..<i + needle.count]) == needle { return i }
            i += 1
        }
        return nil
    }
}

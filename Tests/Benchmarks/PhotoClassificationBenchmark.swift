import ClassificationAPI
import ClassificationCore
import ClassificationService
import Foundation
import Jobs
import RPC
import Torch
import Transport
import WorkLane

/// Issue 41's "fast answers": a 12-megapixel phone JPEG classified by a transfer model (EfficientNet-Lite0 and a
/// head, 224 px), its decoding, resizing and inference timed apart in process; then through the service on the
/// binary protocol (loopback TCP), the first call after start (the app's model loaded and warmed at start, as the
/// service's warm-up does) and the p50 of the calls after; beside onnxruntime running the same model exported to
/// ONNX on the same preprocessed photo. Goals: p50 ≤ 50 ms, first call ≤ 150 ms.
struct PhotoClassificationBenchmark {
    var secondsPerRun: Double
    /// Repeats of each in-process step.
    var repeats = 15
    let cores = ProcessInfo.processInfo.activeProcessorCount

    func run() async throws {
        let featurePrint: FeaturePrint
        do { featurePrint = try FeaturePrint.load(directory: DetectorBenchmark.featurePrintFolder) } catch {
            print("Photo classification benchmark skipped: \(error)")
            return
        }
        try Torch.setThreads(cores)
        let photo = try Self.phonePhoto(width: 4000, height: 3000)
        let file = try Torch.onThreadOfItsOwn { try Self.trainedModel(featurePrint) }
        print(
            "Photo classification: a 4000×3000 JPEG (\(photo.count / 1024) KiB), transfer classifier (EfficientNet-Lite0, 224 px), "
                + "libtorch on \(Torch.threads) threads, \(cores) cores")

        // In process, each step apart, on a thread that ends before the service runs: libgomp's OpenMP threads of a
        // thread that ran torch would stay and slow the service's inference thread (`Torch.onThreadOfItsOwn`).
        let repeats = repeats
        let (header, input, inference) = try Torch.onThreadOfItsOwn {
            () throws -> (header: ModelHeader, input: [Float], inference: (first: Double, p50: Double)) in
            let loadStarted = ContinuousClock.now
            let classifier = try Classifier(file)
            let loadMs = (ContinuousClock.now - loadStarted).seconds * 1000
            func p50(_ body: () throws -> Void) rethrows -> (first: Double, p50: Double) {
                var samples: [Double] = []
                for _ in 0...repeats {
                    let started = ContinuousClock.now
                    try body()
                    samples.append((ContinuousClock.now - started).seconds * 1000)
                }
                let rest = samples.dropFirst().sorted()
                return (samples[0], rest[(rest.count - 1) / 2])
            }
            let header = classifier.header
            let atLeast = classifier.decodeSize(for: try RGBImage.size(of: photo))
            let reduced = try RGBImage.decode(photo, atLeast: atLeast)
            let input = try Preprocessing.input(
                reduced, width: header.inputWidth, height: header.inputHeight, scaling: header.scaling
            ).pixels
            let inference = try p50 { _ = try classifier.probabilities([input]) }
            let whole = try p50 { _ = try RGBImage.decode(photo) }
            let decode = try p50 { _ = try RGBImage.decode(photo, atLeast: atLeast) }
            let quarter = try p50 { _ = try RGBImage.decode(photo, atLeast: classifier.decodeSize) }
            let resize = try p50 {
                _ = try Preprocessing.input(
                    reduced, width: header.inputWidth, height: header.inputHeight, scaling: header.scaling)
            }
            let wholeImage = try RGBImage.decode(photo)
            let resizeWhole = try p50 {
                _ = try Preprocessing.input(
                    wholeImage, width: header.inputWidth, height: header.inputHeight, scaling: header.scaling)
            }
            let request = ClassificationV1.ClassifyRequest(image: photo, top: 1, app: "stripes")
            let wire = try p50 { _ = try ClassificationV1.ClassifyRequest(serializedBytes: request.serializedBytes()) }
            let probe = try p50 { _ = try RGBImage.size(of: photo) }
            let topLabels = try p50 { _ = try classifier.classify(reduced, top: 1) }
            printTable(
                ["step (in process)", "first ms", "p50 ms"],
                [
                    ["load the model (container → TorchScript module)", String(format: "%.1f", loadMs), "-"],
                    [
                        "decode whole (4000×3000)", String(format: "%.1f", whole.first),
                        String(format: "%.1f", whole.p50),
                    ],
                    [
                        "decode at twice the input on both sides (before: 1/4, 1000×750)",
                        String(format: "%.1f", quarter.first), String(format: "%.1f", quarter.p50),
                    ],
                    [
                        "decode reduced (\(reduced.width)×\(reduced.height), twice what fit keeps)",
                        String(format: "%.1f", decode.first), String(format: "%.1f", decode.p50),
                    ],
                    [
                        "resize reduced → 224×224", String(format: "%.1f", resize.first),
                        String(format: "%.1f", resize.p50),
                    ],
                    [
                        "resize whole → 224×224 (without reduced decoding)", String(format: "%.1f", resizeWhole.first),
                        String(format: "%.1f", resizeWhole.p50),
                    ],
                    [
                        "inference (first: right after load)", String(format: "%.1f", inference.first),
                        String(format: "%.1f", inference.p50),
                    ],
                    [
                        "resize and inference (Classifier.classify)", String(format: "%.1f", topLabels.first),
                        String(format: "%.1f", topLabels.p50),
                    ],
                    [
                        "the request's protobuf written and read (3 MB bytes field)",
                        String(format: "%.1f", wire.first),
                        String(format: "%.1f", wire.p50),
                    ],
                    [
                        "the JPEG's header and EXIF read (size check)", String(format: "%.2f", probe.first),
                        String(format: "%.2f", probe.p50),
                    ],
                ])
            return (header, input, inference)
        }
        let request = ClassificationV1.ClassifyRequest(image: photo, top: 1, app: "stripes")

        // Through the service on the binary protocol.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("photo-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let path = scratch.appendingPathComponent("classification.sqlite").path
        let store = try ClassificationStore(path: path)
        try store.saveModel(file, name: "stripes")
        try store.setDeployment(app: "stripes", model: "stripes")
        var rows: [[String]] = []
        var figures: (first: Double, p50: Double) = (0, 0)
        var httpJSON: (p50: Double, bodyBytes: Int, base64: Double)?
        for warm in [true, false] {
            let replica = try ClassificationStore(path: path)
            let lane = WorkLane(name: "lane", threads: cores, queueLimit: 256)
            let service = ClassificationService(
                store: replica, lane: lane, jobs: JobRunner(store: try JobStore(database: replica.database), lane: lane)
            )
            let started = ContinuousClock.now
            if warm { try await service.warmApps() }  // what the service's warm-up does at start
            let warmMs = (ContinuousClock.now - started).seconds * 1000
            let server = try TCPServer(rpc: RPCServer(name: "classification", services: [service]), port: 0)
            let connection = RPCClient(transports: [try TCPClientTransport(endpoint: server.address)])
            let client = ClassificationV1.Classification.Client(wrapping: connection)
            let firstStarted = ContinuousClock.now
            _ = try await client.classify(request)
            let first = (ContinuousClock.now - firstStarted).seconds * 1000
            var p50 = 0.0, calls = 0
            if warm {
                let measurement = try await Measurement.run(
                    callers: 1, duration: .milliseconds(Int64(secondsPerRun * 1000))
                ) {
                    _ = try await client.classify(request)
                }
                p50 = measurement.percentileMilliseconds(0.5)
                calls = measurement.calls
                figures = (first, p50)
                httpJSON = Self.connectJSON(port: server.port, photo: photo, calls: repeats)
            }
            rows.append([
                warm
                    ? "loaded and warmed at start (\(String(format: "%.0f", warmMs)) ms before serving)"
                    : "not warmed (loaded by the first call)",
                String(format: "%.1f", first), warm ? String(format: "%.1f", p50) : "-", warm ? "\(calls)" : "-",
            ])
            connection.close()
            await server.shutdown(grace: .seconds(1))
        }
        print("Classify on the binary protocol (loopback TCP), the 12 MP JPEG, app \"stripes\":")
        printTable(["service", "first call ms", "p50 ms", "calls"], rows)
        if let httpJSON {
            print(
                String(
                    format:
                        "Classify over HTTP/JSON (Connect, one keep-alive connection), the same photo base64 in a %.1f MB body: p50 %.1f ms "
                        + "against %.1f ms on the binary protocol (+%.1f ms: the base64 and JSON transcoding, and %.0f %% more bytes); "
                        + "the client's base64 encoding alone %.1f ms",
                    Double(httpJSON.bodyBytes) / 1e6, httpJSON.p50, figures.p50, httpJSON.p50 - figures.p50,
                    (Double(httpJSON.bodyBytes) / Double(photo.count) - 1) * 100, httpJSON.base64))
        } else {
            print("Classify over HTTP/JSON: no answer (see the service's log)")
        }

        // onnxruntime on the exported model, the same photo preprocessed as the service does.
        if let python = Self.onnxruntimePython {
            let onnx = scratch.appendingPathComponent("stripes.onnx"),
                inputs = scratch.appendingPathComponent("input.f32")
            try Data(try ONNXExport.export(file, name: "stripes")).write(to: onnx)
            let mean = header.mean ?? [0, 0, 0], std = header.std ?? [1, 1, 1], plane = input.count / 3
            let normalised = input.indices.map { (input[$0] - mean[$0 / plane]) / std[$0 / plane] }
            try normalised.withUnsafeBytes { try Data($0).write(to: inputs) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments = [Self.runONNX, onnx.path, inputs.path, "1", "\(repeats)"]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
            let timing = json?["timing"] as? [String: Double] ?? [:]
            let theirs = (json?["probabilities"] as? [[Double]])?.first ?? []
            let ours = try Torch.onThreadOfItsOwn { try Classifier(file).probabilities([input])[0] }
            let difference = zip(theirs, ours).map { abs($0 - Double($1)) }.max() ?? .nan
            print(
                String(
                    format:
                        "onnxruntime (CPU, its default threads) on the exported model, the same preprocessed input: session %.0f ms, "
                        + "first run %.1f ms, p50 %.1f ms (libtorch in process: %.1f ms); probabilities within %.1e of the service's",
                    timing["session_ms"] ?? 0, timing["first_ms"] ?? 0, timing["p50_ms"] ?? 0, inference.p50, difference
                ))
        } else {
            print("onnxruntime not installed (compose/compose onnxruntime): its figures not measured")
        }
        print(
            String(
                format: "goal classify a 12 MP JPEG p50 ≤ 50 ms on the binary protocol: %.1f ms %@", figures.p50,
                figures.p50 <= 50 ? "met" : "NOT met"))
        print(
            String(
                format: "goal first call after start ≤ 150 ms: %.1f ms %@", figures.first,
                figures.first <= 150 ? "met" : "NOT met"))
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let runONNX = root.appendingPathComponent("Services/Classification/tools/run_onnx.py").path
    static var onnxruntimePython: String? {
        let path =
            ProcessInfo.processInfo.environment["MENAGERIE_ONNXRUNTIME_PYTHON"]
            ?? root.appendingPathComponent("compose/.cache/onnxruntime-venv/bin/python").path
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    /// Classify over HTTP/JSON as a browser or a phone app without protobuf would call it: a Connect unary POST
    /// whose JSON carries the photo in base64 (protobuf's JSON mapping of bytes), `calls` times on one keep-alive
    /// connection. The p50 of the whole exchange, the body's size and the client's base64 encoding time; nil when a
    /// call is not answered 200.
    static func connectJSON(port: Int, photo: [UInt8], calls: Int) -> (p50: Double, bodyBytes: Int, base64: Double)? {
        let encodeStarted = ContinuousClock.now
        let base64 = Data(photo).base64EncodedString()
        let base64Ms = (ContinuousClock.now - encodeStarted).seconds * 1000
        let body = Array(#"{"image":""#.utf8) + Array(base64.utf8) + Array(#"","top":1,"app":"stripes"}"#.utf8)
        let head =
            "POST /menagerie.classification.v1.Classification/Classify HTTP/1.1\r\nHost: classification\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
        guard let socket = AttackSocket(port: port, timeout: 60) else { return nil }
        var samples: [Double] = []
        for _ in 0...calls {
            let started = ContinuousClock.now
            guard socket.write(Array(head.utf8) + body), socket.readHTTPStatuses(until: 1).ok == 1 else { return nil }
            samples.append((ContinuousClock.now - started).seconds * 1000)
        }
        let rest = samples.dropFirst().sorted()
        return (rest[(rest.count - 1) / 2], body.count, base64Ms)
    }

    /// A phone photo's size and about its entropy: a smooth scene (two gradients and soft bands) under sensor-like
    /// noise, JPEG quality 90 — a few MB, as a phone's 12 MP JPEG.
    static func phonePhoto(width: Int, height: Int) throws -> [UInt8] {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        var random = SeededRandom(seed: 41)
        for y in 0..<height {
            for x in 0..<width {
                let band = ((x + y / 3) / 97) % 2 == 0 ? 30 : 0
                let base = [x * 180 / width + band, y * 160 / height + 40, 200 - x * 120 / width]
                for c in 0..<3 {
                    let noise = Int(random.next() % 25) - 12
                    pixels[(y * width + x) * 3 + c] = UInt8(max(0, min(255, base[c] + noise)))
                }
            }
        }
        return try RGBImage(width: width, height: height, pixels: pixels).jpeg(quality: 90)
    }

    /// A transfer classifier of stripes across and down (as ONNXTransferExportTests trains): its network is what
    /// the timing is about; the head is small whatever it learnt.
    static func trainedModel(_ featurePrint: FeaturePrint) throws -> ModelFile {
        var files: [(String, [UInt8])] = []
        for seed in 0..<8 {
            var random = SeededRandom(seed: UInt64(seed))
            let across = seed % 2 == 0, width = 80, height = 60, period = 6 + Int(random.next() % 6)
            var pixels = [UInt8](repeating: 0, count: width * height * 3)
            for y in 0..<height {
                for x in 0..<width where ((across ? y : x) / period) % 2 == 0 {
                    for c in 0..<3 { pixels[3 * (y * width + x) + c] = UInt8(100 + random.next() % 156) }
                }
            }
            files.append(
                (
                    "\(across ? "across" : "down")/\(seed).jpg",
                    try RGBImage(width: width, height: height, pixels: pixels).jpeg(quality: 95)
                ))
        }
        var options = ClassifierTrainingOptions()
        options.algorithm = .transfer
        options.augmentation = Augmentation.none
        options.validationFraction = 0
        return try ClassifierTrainer.train(
            try DatasetBuilder.classification(files: files), options: options, featurePrint: featurePrint)
    }
}

import Base
import ClassificationAPI
import ClassificationCore
import ClassificationService
import Foundation
import Jobs
import RPC
import Schema
import ServiceKit
import Synchronization
import Torch
import Transport
import WorkLane

/// The classification issue's figures beside its goals, on the shared sets (`<package root>/../shared/datasets`):
/// digits test accuracy and training seconds with `features` and `cnn` (the service's defaults), digit-detection
/// mAP at IoU 0.5 and 0.5:0.95 on `test-annotations.json` after training on `train-annotations.json`, the p50
/// latency of Classify on a 640×480 JPEG through the service (RPCClient over loopback TCP), and predictions per
/// second with 1 and with 3 replicas — services in this process, each with its own connection to one SQLite file,
/// its own heavy-work lane and TCP server, as `compose scale classification=3` runs them — a client spreading its
/// calls over their endpoints. Training runs as the service's training job does: the core's trainers with
/// libtorch's threads set to the cores.
struct ClassificationBenchmark {
    /// cnn epochs (nil: the service's default).
    var cnnEpochs: Int?
    /// yolo epochs (nil: the service's default).
    var detectorEpochs: Int?
    /// At most this many training images per digit (nil: all), for quick runs.
    var imagesPerLabel: Int?
    /// At most this many training scenes (nil: all).
    var detectionImages: Int?
    /// Seconds of each latency and throughput measurement.
    var secondsPerRun: Double
    let cores = ProcessInfo.processInfo.activeProcessorCount

    static let datasets = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/datasets")

    func run() async throws {
        let digits = Self.datasets.appendingPathComponent("digits"),
            scenes = Self.datasets.appendingPathComponent("digit-detection")
        guard FileManager.default.fileExists(atPath: digits.path), FileManager.default.fileExists(atPath: scenes.path)
        else {
            print("Classification benchmark skipped: \(digits.path) or \(scenes.path) is missing")
            return
        }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "classification-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        try Torch.setThreads(cores)
        print(
            "Classification benchmark: \(cores) cores, libtorch on \(Torch.threads) threads, "
                + "cnn epochs \(cnnEpochs.map(String.init) ?? "default"), yolo epochs \(detectorEpochs.map(String.init) ?? "default")"
                + (imagesPerLabel.map { ", at most \($0) training digits per label" } ?? "")
                + (detectionImages.map { ", at most \($0) training scenes" } ?? ""))

        var verdicts: [String] = []
        func verdict(_ goal: String, _ figure: String, _ met: Bool) {
            verdicts.append("goal \(goal): \(figure) \(met ? "met" : "NOT met")")
        }

        // Digits: train/ → test/.
        var train = try DatasetBuilder.classification(directory: digits.appendingPathComponent("train"))
        let test = try DatasetBuilder.classification(directory: digits.appendingPathComponent("test"))
        if let imagesPerLabel {
            var taken: [Int: Int] = [:]
            train.samples = train.samples.filter { sample in
                taken[sample.label, default: 0] += 1
                return taken[sample.label]! <= imagesPerLabel
            }
        }
        var rows: [[String]] = []
        var files: [ClassifierAlgorithm: ModelFile] = [:]
        // features and cnn with the service's defaults (cnn: the input side from the images' detail, 16 for the
        // digits; crop and rotation; a first pass with 10 % held out, then the model kept trained on every image).
        var defaultCNN = ClassifierTrainingOptions()
        defaultCNN.epochs = cnnEpochs
        var features = ClassifierTrainingOptions()
        features.algorithm = .features
        for (name, options, goal) in [
            ("features (defaults)", features, 0.97), ("cnn (defaults)", defaultCNN, 0.99),
        ] {
            let started = ContinuousClock.now
            let file = try ClassifierTrainer.train(train, options: options)
            let seconds = (ContinuousClock.now - started).seconds
            let accuracy = try ClassifierEvaluation.run(Classifier(file), on: test).accuracy
            // The defaults' models are served below: what a user gets without options.
            files[options.algorithm] = file
            rows.append([
                "digits", name, "\(train.samples.count) → \(test.samples.count)", String(format: "%.1f", seconds),
                percent(file.header.validationAccuracy), String(format: "%.1f %%", accuracy * 100), "", "",
            ])
            verdict(
                "digits test accuracy with \(name) ≥ \(Int(goal * 100)) %", String(format: "%.1f %%", accuracy * 100),
                accuracy >= goal)
            if options.algorithm == .features {
                verdict("features training < 30 s", String(format: "%.1f s", seconds), seconds < 30)
            }
        }

        // Digit detection: train-annotations.json → test-annotations.json.
        let (scenesTrain, scenesTest) = try DetectorBenchmark.scenes(scenes, trainingAtMost: detectionImages)
        var detectorOptions = DetectorTrainingOptions()
        if let detectorEpochs { detectorOptions.epochs = detectorEpochs }
        // From scratch, then transfer learning from the digits cnn trained above (`--base`): its layers start the backbone.
        var detectorFile: ModelFile?
        for (name, base) in [("yolo (from scratch)", nil), ("yolo (--base the digits cnn)", files[.cnn])] {
            let started = ContinuousClock.now
            let file = try DetectorTrainer.train(scenesTrain, options: detectorOptions, base: base)
            let seconds = (ContinuousClock.now - started).seconds
            let detection = try DetectorEvaluation.run(Detector(file), on: scenesTest)
            detectorFile = detectorFile ?? file
            rows.append([
                "digit-detection", name, "\(scenesTrain.samples.count) → \(scenesTest.samples.count)",
                String(format: "%.1f", seconds),
                "", "", String(format: "%.3f", detection.map50), String(format: "%.3f", detection.map50to95),
            ])
            verdict(
                "digit-detection mAP50 ≥ 0.90 with \(name)", String(format: "%.3f", detection.map50),
                detection.map50 >= 0.90)
            verdicts.append(
                String(
                    format:
                        "digit-detection mAP50:95 with \(name) %.3f (no goal; Create ML's \"varied I/U\" in the issue: 0.22 from scratch, 0.32 transfer)",
                    detection.map50to95))
        }
        // A transfer detector on the feature print (stride 16), when one is installed, for DetectStream beside yolo.
        var transferDetector: ModelFile?
        if let featurePrint = try? FeaturePrint.load(directory: DetectorBenchmark.featurePrintFolder) {
            var options = detectorOptions
            options.inputSize = featurePrint.manifest.inputWidth
            options.featureStride = 16
            let started = ContinuousClock.now
            let file = try DetectorTrainer.train(scenesTrain, options: options, featurePrint: featurePrint)
            let detection = try DetectorEvaluation.run(try Detectors.load(file), on: scenesTest)
            rows.append([
                "digit-detection", "transfer (feature print, stride 16)",
                "\(scenesTrain.samples.count) → \(scenesTest.samples.count)",
                String(format: "%.1f", (ContinuousClock.now - started).seconds), "", "",
                String(format: "%.3f", detection.map50),
                String(format: "%.3f", detection.map50to95),
            ])
            transferDetector = file
        } else {
            verdicts.append(
                "no feature print at \(DetectorBenchmark.featurePrintFolder): DetectStream of a transfer detector not measured"
            )
        }
        printTable(
            [
                "dataset", "algorithm", "train → test images", "training s", "validation", "test accuracy", "mAP50",
                "mAP50:95",
            ], rows)
        for line in verdicts { print(line) }

        try await serve(
            files: files, detector: detectorFile!, transferDetector: transferDetector, scene: scenesTest,
            scratch: scratch)
    }

    /// Classify latency and predictions per second through 1 and 3 replicas sharing one SQLite file.
    func serve(
        files: [ClassifierAlgorithm: ModelFile], detector: ModelFile, transferDetector: ModelFile?, scene: Dataset,
        scratch: URL
    ) async throws {
        let path = scratch.appendingPathComponent("classification.sqlite").path
        let store = try ClassificationStore(path: path)
        // The app's models (what a call naming no model gets): the cnn, the default algorithm, and yolo.
        try store.saveModel(files[.cnn]!, name: "digits-cnn")
        try store.saveModel(files[.features]!, name: "digits-features")
        try store.saveModel(detector, name: "scenes-yolo")
        try store.setDeployment(app: "digits", model: "digits-cnn")
        try store.setDeployment(app: "digits", model: "scenes-yolo")
        if let transferDetector { try store.saveModel(transferDetector, name: "scenes-transfer") }
        let photo = try Self.photo(from: scene)

        var servers: [TCPServer] = []
        var clients: [ClassificationV1.Classification.Client] = []
        var connections: [RPCClient] = []
        for index in 0..<3 {
            let replicaStore = try ClassificationStore(path: path)
            let lane = WorkLane(name: "lane", threads: cores, queueLimit: 256)
            let jobs = JobRunner(store: try JobStore(database: replicaStore.database), lane: lane)
            let service = ClassificationService(store: replicaStore, lane: lane, jobs: jobs)
            let server = try TCPServer(rpc: RPCServer(name: "classification-\(index)", services: [service]), port: 0)
            let connection = RPCClient(transports: [try TCPClientTransport(endpoint: server.address)])
            servers.append(server)
            connections.append(connection)
            clients.append(ClassificationV1.Classification.Client(wrapping: connection))
        }
        defer { for connection in connections { connection.close() } }
        let duration = Duration.milliseconds(Int64(secondsPerRun * 1000))

        // Latency: one caller, one replica, each model once warm.
        var rows: [[String]] = []
        var p50s: [String: Double] = [:]
        for model in ["digits-cnn", "digits-features", "scenes-yolo"] {
            let client = clients[0]
            let call: @Sendable () async throws -> Void
            if model == "scenes-yolo" {
                call = { _ = try await client.detect(ClassificationV1.DetectRequest(image: photo, model: model)) }
            } else {
                call = { _ = try await client.classify(ClassificationV1.ClassifyRequest(image: photo, model: model)) }
            }
            try await call()
            let measurement = try await Measurement.run(callers: 1, duration: duration, call)
            p50s[model] = measurement.percentileMilliseconds(0.5)
            rows.append([
                model == "scenes-yolo" ? "detect" : "classify", model, "1", "1", "\(measurement.calls)",
                String(format: "%.1f", measurement.callsPerSecond),
                String(format: "%.2f", measurement.percentileMilliseconds(0.5)),
                String(format: "%.2f", measurement.percentileMilliseconds(0.99)),
            ])
        }

        // DetectStream: a camera's 30 frames per second of the 640×480 JPEG to the default yolo, one stream.
        let stream = try await Self.detectStream(
            client: clients[0], photo: photo, model: "scenes-yolo", fps: 30, duration: duration)
        // The same camera to a transfer detector (EfficientNet-Lite0 to stride 16, 224 px): slower, as the issue expects.
        let transferStream =
            transferDetector == nil
            ? nil
            : try await Self.detectStream(
                client: clients[0], photo: photo, model: "scenes-transfer", fps: 30, duration: duration)

        // Throughput: the app's (cnn) classifier, the same callers spread over 1 or 3 replicas' endpoints.
        let callers = 4 * cores
        var throughput: [Int: Double] = [:]
        for replicas in [1, 3] {
            let next = BenchCounter()
            let chosen = Array(clients.prefix(replicas))
            for client in chosen { _ = try await client.classify(ClassificationV1.ClassifyRequest(image: photo)) }
            let measurement = try await Measurement.run(callers: callers, duration: duration) {
                _ = try await chosen[next.take() % chosen.count].classify(
                    ClassificationV1.ClassifyRequest(image: photo))
            }
            throughput[replicas] = measurement.callsPerSecond
            rows.append([
                "classify", "digits-cnn (the app's)", "\(replicas)", "\(callers)", "\(measurement.calls)",
                String(format: "%.1f", measurement.callsPerSecond),
                String(format: "%.2f", measurement.percentileMilliseconds(0.5)),
                String(format: "%.2f", measurement.percentileMilliseconds(0.99)),
            ])
        }
        print(
            "Predictions on a 640×480 JPEG (\(photo.count) bytes), \(secondsPerRun) s per run, replicas in this process sharing one SQLite file:"
        )
        printTable(["call", "model", "replicas", "callers", "calls", "calls/s", "p50 ms", "p99 ms"], rows)
        let p50 = p50s["digits-cnn"] ?? 0
        print(
            "goal classify p50 < 20 ms for a 640×480 JPEG (cnn, the default): \(String(format: "%.2f ms", p50)) \(p50 < 20 ? "met" : "NOT met")"
                + String(format: " (features %.2f ms)", p50s["digits-features"] ?? 0))
        print(
            String(
                format:
                    "DetectStream at 30 fps sent (640×480 JPEG, yolo): %d of %d frames answered, %.1f answers/s, %llu dropped, "
                    + "latency (sent → answer) p50 %.1f ms, p95 %.1f ms", stream.answered, stream.sent,
                stream.answersPerSecond, stream.dropped,
                stream.p50, stream.p95))
        if let transferStream {
            print(
                String(
                    format:
                        "DetectStream at 30 fps sent (640×480 JPEG, transfer stride 16): %d of %d frames answered, %.1f answers/s, "
                        + "%llu dropped, latency (sent → answer) p50 %.1f ms, p95 %.1f ms (no goal)",
                    transferStream.answered, transferStream.sent,
                    transferStream.answersPerSecond, transferStream.dropped, transferStream.p50, transferStream.p95))
        }
        let streamMet = stream.answersPerSecond >= 25 && stream.p95 < 100
        print(
            String(
                format: "goal DetectStream ≥ 25 fps and p95 < 100 ms with the default yolo: %.1f fps, p95 %.1f ms %@",
                stream.answersPerSecond, stream.p95, streamMet ? "met" : "NOT met"))
        let one = throughput[1] ?? 0, three = throughput[3] ?? 0
        print(
            String(
                format:
                    "predictions/s: 1 replica %.1f, 3 replicas %.1f (%.2f×; no goal: on %d cores the replicas share the same CPUs)",
                one, three, three / max(one, 1e-9), cores))
        for server in servers { await server.shutdown(grace: .seconds(1)) }
    }

    /// Sends `photo` as the frames of a camera at `fps` for `duration` over one DetectStream and measures each answered
    /// frame's latency from its sending to its answer; frames the service dropped (the camera outran the model) have
    /// none.
    static func detectStream(
        client: ClassificationV1.Classification.Client, photo: [UInt8], model: String, fps: Double,
        duration: Duration
    ) async throws -> (sent: Int, answered: Int, dropped: UInt64, answersPerSecond: Double, p50: Double, p95: Double) {
        let interval = Duration.nanoseconds(Int64(1e9 / fps))
        let frames = max(1, Int(duration / interval))
        let sentAt = Mutex<[UInt64: ContinuousClock.Instant]>([:])
        let started = ContinuousClock.now
        let (latencies, dropped) = try await client.detectStream(
            requests: { writer in
                for n in 1...frames {
                    try await Task.sleep(until: started + interval * (n - 1), clock: .continuous)
                    sentAt.withLock { $0[UInt64(n)] = .now }
                    try await writer.send(
                        ClassificationV1.DetectStreamRequest(
                            request: .init(image: photo, model: model), frame: UInt64(n)))
                }
            },
            responses: { responses in
                var latencies: [Double] = []
                var dropped: UInt64 = 0
                for try await answer in responses {
                    if let sent = sentAt.withLock({ $0[answer.frame] }) {
                        latencies.append((ContinuousClock.now - sent).seconds * 1000)
                    }
                    dropped = answer.droppedTotal
                }
                return (latencies, dropped)
            })
        let seconds = (ContinuousClock.now - started).seconds
        let sorted = latencies.sorted()
        func percentile(_ p: Double) -> Double {
            sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * p).rounded(.up)) - 1))]
        }
        return (
            frames, latencies.count, dropped, Double(latencies.count) / max(seconds, 1e-9), percentile(0.5),
            percentile(0.95)
        )
    }

    /// A 640×480 JPEG photo: the first test scene scaled up (bilinear), as a phone's photo would arrive.
    static func photo(from dataset: Dataset) throws -> [UInt8] {
        let sample = dataset.samples[0]
        let source = try RGBImage.decode(dataset.images[sample.hash]!, name: sample.name)
        let width = 640, height = 480
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            let sy = max(0, (Double(y) + 0.5) * Double(source.height) / Double(height) - 0.5)
            let y0 = min(source.height - 1, Int(sy)), y1 = min(source.height - 1, y0 + 1), fy = sy - Double(y0)
            for x in 0..<width {
                let sx = max(0, (Double(x) + 0.5) * Double(source.width) / Double(width) - 0.5)
                let x0 = min(source.width - 1, Int(sx)), x1 = min(source.width - 1, x0 + 1), fx = sx - Double(x0)
                for c in 0..<3 {
                    func at(_ x: Int, _ y: Int) -> Double { Double(source.pixels[(y * source.width + x) * 3 + c]) }
                    let value =
                        (at(x0, y0) * (1 - fx) + at(x1, y0) * fx) * (1 - fy) + (at(x0, y1) * (1 - fx) + at(x1, y1) * fx)
                        * fy
                    pixels[(y * width + x) * 3 + c] = UInt8(max(0, min(255, value.rounded())))
                }
            }
        }
        return try RGBImage(width: width, height: height, pixels: pixels).jpeg(quality: 90)
    }

    private func percent(_ value: Double?) -> String { value.map { String(format: "%.1f %%", $0 * 100) } ?? "" }
}

private final class BenchCounter: Sendable {
    private let value = Atomic<Int>(0)
    func take() -> Int { value.wrappingAdd(1, ordering: .relaxed).oldValue }
}

import Base
import ClassificationAPI
import ClassificationCore
import Foundation
import Jobs
import JobsAPI
import JobsService
import RPC
import Schema
import Torch
import WorkLane

/// The classification service's RPC methods (`menagerie.classification.v1.Classification`): thin handlers that
/// validate the request, run the core on the heavy-work lane (decoding, training, inference are CPU-bound and would
/// hold a server worker, so health checks would wait) and convert the answer.
public struct ClassificationService: ClassificationV1.Classification.ServiceProtocol {
    public let store: ClassificationStore
    public let lane: WorkLane
    /// Runs trainings (on the lane, recorded in the service's database); offer `JobsService(runner: jobs)` beside.
    public let jobs: JobRunner
    public let limits: Limits
    /// The pretrained network `transfer` trains on.
    public let featurePrint: FeaturePrintSource
    let cache: ModelCache
    /// The one thread every inference runs on (`inference`), with `Limits.torchThreads` OpenMP threads: a second
    /// thread running torch's parallel operations would double each inference's time (`Torch.onThreadOfItsOwn`).
    let inferenceLane: WorkLane

    /// The kind of the jobs Train starts.
    public static let trainJobKind = "classification.train"

    public struct Limits: Sendable {
        /// libtorch's intra-op threads for each piece of work (it uses one by default).
        public var torchThreads = ProcessInfo.processInfo.activeProcessorCount
        /// An upload's total bytes (a dataset is held in memory while it is validated).
        /// What dataset uploads and model imports and exports (whole files held for a call) draw from: the process's
        /// unless a test gives its own.
        public var memoryBudget = MemoryBudget.process
        /// How long an upload's or import's next chunk waits for room in the budget before the call is refused;
        /// meanwhile the stream is not read, so flow control holds the client (backpressure before refusal).
        public var budgetPatience = MemoryBudget.patience
        public var maxUploadBytes = 1 << 30
        public var maxUploadFiles = 200_000
        /// Decoded pixels of one image, checked from its header before decoding.
        public var pixelLimit = RGBImage.defaultPixelLimit
        public init() {}
    }

    public init(
        store: ClassificationStore, lane: WorkLane, jobs: JobRunner, limits: Limits = Limits(),
        featurePrint: FeaturePrintSource = FeaturePrintSource(directory: nil), logger: Logger? = nil
    ) {
        self.store = store
        self.lane = lane
        self.jobs = jobs
        self.limits = limits
        self.featurePrint = featurePrint
        cache = ModelCache(store: store, logger: logger)
        inferenceLane = WorkLane(name: "inference", threads: 1, queueLimit: lane.queueLimit)
    }

    /// Runs `work` on the lane, libtorch on one thread there (OpenMP's count is per thread): what runs on the lane
    /// (the database, uploads, a model's export) is no inference, and a lane thread that ran torch's parallel
    /// operations would keep a team of OpenMP threads that slows every inference (`Torch.onThreadOfItsOwn`).
    func heavy<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await lane.run {
            try Torch.setThreads(1)
            return try work()
        }
    }

    /// Runs `work`, an inference (loading and warming models, classifying, detecting, evaluating), on the inference
    /// thread with libtorch's `Limits.torchThreads`: one after another, each with every core.
    func inference<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let threads = limits.torchThreads
        return try await inferenceLane.run {
            try Torch.setThreads(threads)
            return try work()
        }
    }

    /// Runs `work`, an inference, on the inference thread holding the decoded size of `image` (3 bytes a pixel, up to the pixel limit) of the
    /// memory budget: the lane's threads each decoding a 40-megapixel photo hold 120 MB apiece, which the budget
    /// must see like uploads. A photo that does not fit waits for room, then is refused RESOURCE_EXHAUSTED; one whose
    /// header does not read holds nothing (its decoding fails with the reason).
    func inference<T: Sendable>(decoding image: [UInt8], _ work: @escaping @Sendable () throws -> T) async throws -> T {
        guard let size = try? RGBImage.size(of: image) else { return try await inference(work) }
        let bytes = min(size.width * size.height, limits.pixelLimit) * 3
        let held = MemoryReservation(limits.memoryBudget)
        guard await held.grow(by: bytes, waitingUpTo: limits.budgetPatience) else {
            let budget = limits.memoryBudget
            throw RPCError(
                .resourceExhausted,
                "decoding this \(size.width)×\(size.height) photo needs \(bytes >> 20) MiB and the server's memory budget "
                    + "(\(budget.limit >> 20) MiB, \(budget.used >> 20) held) had no room for it within \(limits.budgetPatience); retry later"
            )
        }
        defer { held.releaseAll() }
        return try await inference(work)
    }

    // MARK: Datasets

    public func uploadDataset(
        requests: RequestStream<ClassificationV1.UploadDatasetRequest>, context: ServerContext
    ) async throws -> ClassificationV1.DatasetSummary {
        let pixelLimit = limits.pixelLimit
        let held = MemoryReservation(limits.memoryBudget)
        defer { held.releaseAll() }
        let upload = try await Upload.receive(requests, limits: limits, held: held) { [self] path, bytes in
            try await heavy {
                let image = try RGBImage.decode(bytes, name: path, pixelLimit: pixelLimit)
                return (image.width, image.height)
            }
        }
        let store = store, owner = Self.owner(context)
        return try await heavy {
            let dataset: Dataset
            switch upload.header.kind {
            case .classification:
                dataset = try DatasetBuilder.classification(
                    files: upload.files.map { ($0.key, $0.value) }, pixelLimit: pixelLimit, measured: upload.sizes)
            default:
                dataset = try DatasetBuilder.detection(
                    format: upload.format, annotations: upload.header.annotations, files: upload.files,
                    pixelLimit: pixelLimit, skipped: Set(upload.skipped.map(\.path)), measured: upload.sizes)
            }
            try store.saveDataset(dataset, name: upload.header.name, owner: owner ?? ClassificationStore.formerOwner)
            var summary = try Self.summary(store, upload.header.name, owner: owner)
            summary.duplicates = Int64(Upload.duplicates(upload.files, dataset))
            summary.skipped = upload.skipped
            return summary
        }
    }

    public func listDatasets(request: ClassificationV1.ListDatasetsRequest, context: ServerContext) async throws
        -> ClassificationV1.ListDatasetsResponse
    {
        let store = store, owner = Self.owner(context)
        return try await heavy {
            ClassificationV1.ListDatasetsResponse(
                datasets: try store.datasets(owner: owner).map { try Self.summary(store, $0.name, owner: owner) })
        }
    }

    public func getDataset(request: ClassificationV1.GetDatasetRequest, context: ServerContext) async throws
        -> ClassificationV1.DatasetSummary
    {
        let name = try RequestValidation.name(request.name, field: "name")
        let store = store, owner = Self.owner(context)
        return try await heavy { try Self.summary(store, name, owner: owner) }
    }

    public func deleteDataset(request: ClassificationV1.DeleteDatasetRequest, context: ServerContext) async throws
        -> ClassificationV1.DeleteDatasetResponse
    {
        let name = try RequestValidation.name(request.name, field: "name")
        let store = store, owner = Self.owner(context)
        try await heavy { try store.deleteDataset(named: name, owner: owner) }
        return ClassificationV1.DeleteDatasetResponse()
    }

    /// Whose datasets a call sees: its caller's (the server's guard established it); nil without a guard (tests
    /// in process): anyone's.
    static func owner(_ context: ServerContext) -> String? { context.caller?.name }

    static func summary(_ store: ClassificationStore, _ name: String, owner: String?) throws
        -> ClassificationV1.DatasetSummary
    {
        let stored = try store.datasetSummary(named: name, owner: owner)
        var summary = ClassificationV1.DatasetSummary()
        summary.name = stored.name
        summary.kind = stored.kind == .classification ? .classification : .detection
        summary.images = Int64(stored.images)
        summary.createdAt = stored.createdAt.timeIntervalSince1970
        summary.labels = try store.labelCounts(dataset: name).map { count in
            var label = ClassificationV1.LabelCount()
            label.label = count.label
            label.images = Int64(count.images)
            label.objects = Int64(count.objects)
            return label
        }
        return summary
    }

    // MARK: Training

    public func train(request: ClassificationV1.TrainRequest, context: ServerContext) async throws -> JobsV1.Job {
        let plan = try RequestValidation.train(request)
        let store = store, threads = limits.torchThreads
        // What can be checked at once is, so a mistake is an error of this call rather than a failed job.
        let dataset = try store.datasetSummary(named: plan.dataset, owner: Self.owner(context))
        guard (dataset.kind == .classification) == (plan.kind == .classifier) else {
            throw RPCError(
                .invalidArgument,
                "dataset \(plan.dataset) is a \(dataset.kind.rawValue) dataset; a \(plan.kind.rawValue) trains on a \(plan.kind == .classifier ? "classification" : "detection") one"
            )
        }
        if let validation = plan.validationDataset {
            _ = try store.datasetSummary(named: validation, owner: Self.owner(context))
        }
        if plan.includeFeedback, let feedback = try await heavy({ try store.feedbackDataset() }) {
            // Checked here so a feedback label the dataset lacks is this call's INVALID_ARGUMENT, not a failed job.
            do { try feedback.checkLabels(within: try store.labelCounts(dataset: plan.dataset).map(\.label)) } catch let
                error as ClassificationError
            {
                throw RPCError(.invalidArgument, "include_feedback: \(error.message)")
            }
        }
        if let base = plan.base {
            // Checked here so a base that cannot serve is this call's INVALID_ARGUMENT, not a failed job.
            let header = try await heavy { try store.model(named: base).header }
            do {
                switch plan.kind {
                case .classifier: try ClassifierTrainer.checkBase(header, algorithm: plan.classifierAlgorithm)
                case .detector: try DetectorTrainer.checkBase(header)
                }
            } catch let error as ClassificationError {
                throw RPCError(.invalidArgument, "base_model: \(error.message)")
            }
        }
        if let name = plan.name, (try? store.modelStamp(named: name)) != nil {
            throw RPCError(.alreadyExists, "model \(name) already exists")
        }
        let featurePrint = featurePrint
        if plan.algorithm == "transfer" || plan.cropClassifier == true {
            // Checked (and its checksum with it) here so a missing or corrupt feature print is this call's error.
            _ = try await heavy { try featurePrint.load() }
        }
        let job = try await jobs.start(
            kind: Self.trainJobKind, submitter: context.submitter, user: context.caller?.name
        ) { context -> ClassificationV1.TrainingResult in
            // On a thread of its own, so its OpenMP threads end with it and leave inference its speed.
            try Torch.onThreadOfItsOwn {
                try Self.train(plan, threads: threads, store: store, featurePrint: featurePrint, context: context)
            }
        }
        return JobsV1.Job(job)
    }

    /// A training job's work: the model trained on `plan` and saved.
    static func train(
        _ plan: RequestValidation.Training, threads: Int, store: ClassificationStore, featurePrint: FeaturePrintSource,
        context: JobContext
    ) throws -> ClassificationV1.TrainingResult {
        try Torch.setThreads(threads)
        let data = try store.dataset(named: plan.dataset)
        context.report(progress: 0, message: "preparing \(data.samples.count) images")
        // Kept with the model: `model show` draws it.
        var history: [ClassificationCore.TrainingProgress] = []
        let report: (ClassificationCore.TrainingProgress) throws -> Void = { progress in
            history.append(progress)
            try context.checkCancellation()
            context.report(progress: progress.fraction, message: Self.progressText(progress))
        }
        var file: ModelFile
        do {
            switch plan.kind {
            case .classifier:
                var options = ClassifierTrainingOptions()
                // No algorithm named: transfer for photos when the feature print is installed, else the cnn.
                options.algorithm =
                    plan.algorithm.isEmpty
                    ? (plan.base == nil
                        ? ClassifierAlgorithm.automatic(for: data, featurePrintInstalled: featurePrint.isInstalled)
                        : .cnn)
                    : plan.classifierAlgorithm
                options.epochs = plan.epochs
                options.inputSize = plan.imageSize
                options.augmentation = plan.augmentation
                options.seed = plan.seed
                if let size = plan.batchSize { options.batchSize = size }
                options.patience = plan.patience
                options.fineTune = plan.fineTune
                if let fraction = plan.validationFraction { options.validationFraction = fraction }
                let validation = try plan.validationDataset.map { try store.dataset(named: $0) }
                let base = try plan.base.map { try store.model(named: $0) }
                var data = data
                if plan.includeFeedback, let feedback = try store.feedbackDataset() {
                    data = try data.merging(feedback)
                }
                let print = options.algorithm == .transfer ? try featurePrint.load() : nil
                file = try ClassifierTrainer.train(
                    data, validation: validation, options: options, base: base,
                    featurePrint: print, featureCache: featurePrint.cache, progress: report)
            case .detector:
                var options = DetectorTrainingOptions()
                if let epochs = plan.epochs { options.epochs = epochs }
                // A transfer detector sees scenes at the size its feature print was trained at unless told.
                let print = plan.algorithm == "transfer" ? try featurePrint.load() : nil
                if let print { options.inputSize = print.manifest.inputWidth }
                if let size = plan.imageSize { options.inputSize = size }
                if let stride = plan.featureStride { options.featureStride = stride }
                if let augmentation = plan.augmentation { options.augmentation = augmentation }
                options.seed = plan.seed
                if let fraction = plan.validationFraction { options.validationFraction = fraction }
                // The trainer stores the mAP on the validation dataset or on the scenes it held out.
                let validation = try plan.validationDataset.map { try store.dataset(named: $0) }
                let base = try plan.base.map { try store.model(named: $0) }
                // Boxes labelled by a transfer classifier of their crops, when asked for: a network pass per box
                // costs Detect and a stream's frame rate, and such a detector exports to no ONNX.
                let crops = (plan.cropClassifier ?? false) ? try featurePrint.load() : nil
                file = try DetectorTrainer.train(
                    data, validation: validation, options: options, base: base, featurePrint: print,
                    cropClassifier: crops, progress: report)
            }
        } catch let interrupted as TrainingInterrupted {
            // Cancelled: the best model so far is kept, marked as such (`interrupted`), and the job ends
            // cancelled, saying where the model went.
            var partial = interrupted.partial
            partial.header.history = history
            partial.header.trainingDatasets = Self.trainingDatasets(plan)
            let name = try plan.name ?? Self.freeName(store, "\(plan.dataset)-\(partial.header.algorithm)")
            try store.saveModel(partial, name: name)
            context.report(
                progress: history.last?.fraction ?? 0,
                message: "cancelled; the best model so far is kept as \(name) (\(partial.header.interrupted ?? ""))"
            )
            throw interrupted.cause
        }
        try context.checkCancellation()
        file.header.history = history
        file.header.trainingDatasets = Self.trainingDatasets(plan)
        let name = try plan.name ?? Self.freeName(store, "\(plan.dataset)-\(file.header.algorithm)")
        try store.saveModel(file, name: name)
        return ClassificationV1.TrainingResult(model: try Self.modelSummary(store, name))
    }

    /// The datasets a training's model learns from: its dataset, and the feedback one when included.
    static func trainingDatasets(_ plan: RequestValidation.Training) -> [String] {
        [plan.dataset]
            + (plan.includeFeedback && plan.kind == .classifier
                ? [ClassificationStore.feedbackDataset(.classifier)] : [])
    }

    static func progressText(_ p: ClassificationCore.TrainingProgress) -> String {
        // The cnn's two passes (validation, then every image) each run --epochs, and say so.
        var text = p.passes == 2 ? (p.pass == 1 ? "pass 1/2 (held-out validation) " : "pass 2/2 (every image) ") : ""
        // A fine-tuned transfer's passes differ in kind and name it.
        if let stage = p.stage { text = "pass \(p.pass)/\(p.passes) (\(stage)) " }
        text += "epoch \(p.epoch)/\(p.epochs) loss \(String(format: "%.4f", p.loss))"
        if p.trainingAccuracy > 0 { text += " accuracy \(String(format: "%.4f", p.trainingAccuracy))" }
        if let validation = p.validationAccuracy { text += " validation \(String(format: "%.4f", validation))" }
        return text
    }

    /// `<prefix>-<n>` with the first n not taken.
    static func freeName(_ store: ClassificationStore, _ prefix: String) throws -> String {
        let taken = Set(try store.models().map(\.name))
        var n = 1
        while taken.contains("\(prefix)-\(n)") { n += 1 }
        return "\(prefix)-\(n)"
    }

    // MARK: Evaluation

    public func evaluate(request: ClassificationV1.EvaluateRequest, context: ServerContext) async throws
        -> ClassificationV1.EvaluateResponse
    {
        let model = try RequestValidation.name(request.model, field: "model")
        let datasetName = try RequestValidation.name(request.dataset, field: "dataset")
        if let confidence = request.confidence, !confidence.isFinite || !(0...1).contains(confidence) {
            throw RPCError(.invalidArgument, "confidence must be 0…1 (got \(confidence))")
        }
        let store = store, cache = cache, owner = Self.owner(context)
        return try await inference {
            let engine = try cache.engine(named: model)
            let dataset = try store.dataset(named: datasetName, owner: owner)
            var response = ClassificationV1.EvaluateResponse()
            response.images = Int64(dataset.samples.count)
            if let warning = try store.trainingOverlapWarning(
                model: engine.header, name: model, dataset: dataset, datasetName: datasetName)
            {
                response.warnings.append(warning)
            }
            switch engine {
            case .classifier(let classifier):
                let evaluation = try ClassifierEvaluation.run(classifier, on: dataset)
                response.accuracy = evaluation.accuracy
                response.labels = evaluation.labels
                response.perClass = evaluation.labels.map { label in
                    let scores = evaluation.perClass[label]!
                    var entry = ClassificationV1.ClassScores()
                    entry.label = label
                    entry.precision = scores.precision
                    entry.recall = scores.recall
                    entry.f1 = scores.f1
                    return entry
                }
                response.confusion = zip(evaluation.labels, evaluation.confusion).map { label, row in
                    ClassificationV1.ConfusionRow(label: label, predicted: row.map(Int64.init))
                }
            case .detector(let detector):
                let confidence = request.confidence ?? DetectorEvaluation.confidence(for: detector.header)
                let evaluation = try DetectorEvaluation.run(detector, on: dataset, confidence: confidence)
                response.labels = detector.header.labels
                response.perClass = detector.header.labels.map { label in
                    var entry = ClassificationV1.ClassScores()
                    entry.label = label
                    entry.ap50 = evaluation.ap50[label]
                    entry.ap5095 = evaluation.ap50to95[label]
                    let counts = evaluation.counts[label] ?? Metrics.MatchCounts()
                    entry.precision = counts.precision
                    entry.recall = counts.recall
                    entry.f1 = counts.f1
                    entry.truePositives = Int64(counts.truePositives)
                    entry.falsePositives = Int64(counts.falsePositives)
                    entry.missed = Int64(counts.missed)
                    entry.operatingPoint = evaluation.operatingPoints[label].map {
                        ClassificationV1.OperatingPoint(
                            confidence: $0.confidence, precision: $0.counts.precision, recall: $0.counts.recall,
                            truePositives: Int64($0.counts.truePositives),
                            falsePositives: Int64($0.counts.falsePositives), missed: Int64($0.counts.missed))
                    }
                    return entry
                }
                response.map50 = evaluation.map50
                response.map5095 = evaluation.map50to95
                response.precision = evaluation.overall.precision
                response.recall = evaluation.overall.recall
                response.f1 = evaluation.overall.f1
                response.confidence = confidence
                response.operatingPrecision = DetectorEvaluation.operatingPrecision
            }
            return response
        }
    }

    // MARK: Prediction

    public func classify(request: ClassificationV1.ClassifyRequest, context: ServerContext) async throws
        -> ClassificationV1.ClassifyResponse
    {
        let plan = try RequestValidation.classify(request)
        let store = store, cache = cache, pixelLimit = limits.pixelLimit
        return try await inference(decoding: plan.image) {
            let (name, app) = try Self.model(plan.model, app: plan.app, kind: .classifier, store: store)
            guard case .classifier(let classifier) = try cache.engine(named: name) else {
                throw RPCError(
                    .invalidArgument, "model \(name) is a detector; classify with a classifier (or use Detect)")
            }
            // Decoded no larger than the resize keeps of it (a 12 MP JPEG fitted to 224 px: libjpeg's 1/8).
            let atLeast =
                (try? RGBImage.size(of: plan.image)).map { classifier.decodeSize(for: $0, scaling: plan.scaling) }
                ?? classifier.decodeSize
            let image = try RGBImage.decode(plan.image, name: "image", pixelLimit: pixelLimit, atLeast: atLeast)
            let predictions = try classifier.classify(image, top: classifier.header.labels.count, scaling: plan.scaling)
            var response = ClassificationV1.ClassifyResponse()
            response.model = name
            guard let best = predictions.first, best.confidence >= plan.minimumConfidence else { return response }
            response.recognised = true
            response.labels = predictions.prefix(plan.top).map {
                ClassificationV1.LabelConfidence(label: $0.label, confidence: $0.confidence)
            }
            if let app {
                response.entry = try store.catalogueEntry(label: best.label, app: app).map(
                    ClassificationV1.CatalogueEntry.init)
            }
            return response
        }
    }

    public func detect(request: ClassificationV1.DetectRequest, context: ServerContext) async throws
        -> ClassificationV1.DetectResponse
    {
        let plan = try RequestValidation.detect(request)
        let store = store, cache = cache, pixelLimit = limits.pixelLimit
        return try await inference(decoding: plan.image) {
            try Self.detect(plan, store: store, cache: cache, pixelLimit: pixelLimit).response
        }
    }

    /// Detect's work, on the lane: shared by `detect` and `detectStream`. With `lenient`, an image that does not
    /// decode (cut, corrupt, not an image) is answered with no boxes and the decoder's error — a stream's frame
    /// should not end the stream — else it is thrown, as Detect does.
    static func detect(
        _ plan: RequestValidation.Detection, store: ClassificationStore, cache: ModelCache, pixelLimit: Int,
        lenient: Bool = false
    ) throws -> (response: ClassificationV1.DetectResponse, error: String?) {
        let (name, _) = try Self.model(plan.model, app: plan.app, kind: .detector, store: store)
        guard case .detector(let detector) = try cache.engine(named: name) else {
            throw RPCError(.invalidArgument, "model \(name) is a classifier; detect with a detector (or use Classify)")
        }
        for label in plan.labels where !detector.header.labels.contains(label) {
            throw RPCError(
                .invalidArgument,
                "labels: \(label) is not one of model \(name)'s labels (\(detector.header.labels.joined(separator: ", ")))"
            )
        }
        // A JPEG decoded no larger than the letterbox keeps of it, twice over; boxes in the photo's own pixels.
        let photo: PhotoDetection
        do {
            photo = try PhotoDetection(plan.image, for: detector, pixelLimit: pixelLimit)
        } catch let error as ClassificationError where lenient {
            var response = ClassificationV1.DetectResponse()
            response.model = name
            return (response, error.message)
        }
        let found = photo.mapped(
            try detector.detect(
                photo.image,
                confidenceThreshold: plan.confidence ?? DetectorEvaluation.confidence(for: detector.header),
                iouThreshold: plan.iou,
                maximum: plan.maximum, labels: plan.labels))
        var response = ClassificationV1.DetectResponse()
        response.model = name
        response.imageWidth = Int32(photo.width)
        response.imageHeight = Int32(photo.height)
        let w = Double(photo.width), h = Double(photo.height)
        response.detections = found.map { d in
            var object = ClassificationV1.DetectedObject()
            object.label = detector.header.labels[d.label]
            object.confidence = d.confidence
            object.boxPx = ClassificationV1.Box(x: d.box.x, y: d.box.y, width: d.box.width, height: d.box.height)
            object.box = ClassificationV1.Box(
                x: d.box.x / w, y: d.box.y / h, width: d.box.width / w, height: d.box.height / h)
            return object
        }
        return (response, nil)
    }

    /// The model that answers and the app whose catalogue goes with it: the model named (with the app named, or
    /// else the one app serving that model, if exactly one is), or the app's model (`Deployments`).
    static func model(_ model: String?, app: String?, kind: ModelHeader.Kind, store: ClassificationStore) throws -> (
        model: String, app: String?
    ) {
        guard let model else {
            let deployed = try store.deployedModel(app: app, kind: kind)
            return (deployed.model, deployed.app)
        }
        if let app { return (model, app) }
        let serving = try store.deployments().filter { $0.model == model && $0.kind == kind }.map(\.app)
        return (model, serving.count == 1 ? serving[0] : nil)
    }

    // MARK: Models

    public func listModels(request: ClassificationV1.ListModelsRequest, context: ServerContext) async throws
        -> ClassificationV1.ListModelsResponse
    {
        let store = store
        return try await heavy {
            ClassificationV1.ListModelsResponse(models: try store.models().map(ClassificationV1.ModelSummary.init))
        }
    }

    public func getModel(request: ClassificationV1.GetModelRequest, context: ServerContext) async throws
        -> ClassificationV1.ModelSummary
    {
        let name = try RequestValidation.name(request.name, field: "name")
        let store = store
        return try await heavy { try Self.modelSummary(store, name) }
    }

    static func modelSummary(_ store: ClassificationStore, _ name: String) throws -> ClassificationV1.ModelSummary {
        guard let model = try store.models().first(where: { $0.name == name }) else {
            throw ClassificationError(.notFound, "no model named \(name)")
        }
        return ClassificationV1.ModelSummary(model)
    }

    public func deleteModel(request: ClassificationV1.DeleteModelRequest, context: ServerContext) async throws
        -> ClassificationV1.DeleteModelResponse
    {
        let name = try RequestValidation.name(request.name, field: "name")
        let store = store, cache = cache
        try await heavy { try store.deleteModel(named: name) }
        cache.forget(name)
        return ClassificationV1.DeleteModelResponse()
    }

    /// Kept for older clients: the app "default"'s model of that kind.
    public func setActiveModel(request: ClassificationV1.SetActiveModelRequest, context: ServerContext) async throws
        -> ClassificationV1.SetActiveModelResponse
    {
        let name = try RequestValidation.name(request.name, field: "name")
        let store = store
        _ = try await heavy { try store.setDeployment(app: ClassificationStore.defaultApp, model: name) }
        return ClassificationV1.SetActiveModelResponse()
    }

    // MARK: Apps

    public func setDeployment(request: ClassificationV1.SetDeploymentRequest, context: ServerContext) async throws
        -> ClassificationV1.Deployment
    {
        let app = try RequestValidation.name(request.app, field: "app")
        let model = try RequestValidation.name(request.model, field: "model")
        let store = store, cache = cache
        let deployment = try await inference {
            let deployment = try store.setDeployment(app: app, model: model)
            // Loaded now, so the app's first caller does not wait for it.
            _ = try? cache.engine(named: model)
            return deployment
        }
        return ClassificationV1.Deployment(deployment)
    }

    public func listDeployments(request: ClassificationV1.ListDeploymentsRequest, context: ServerContext) async throws
        -> ClassificationV1.ListDeploymentsResponse
    {
        let store = store
        return try await heavy {
            ClassificationV1.ListDeploymentsResponse(
                deployments: try store.deployments().map(ClassificationV1.Deployment.init))
        }
    }

    public func deleteDeployment(request: ClassificationV1.DeleteDeploymentRequest, context: ServerContext) async throws
        -> ClassificationV1.DeleteDeploymentResponse
    {
        let app = try RequestValidation.name(request.app, field: "app")
        let kind: ModelHeader.Kind?
        switch request.kind {
        case .unspecified: kind = nil
        case .classifier: kind = .classifier
        case .detector: kind = .detector
        case .unrecognized(let value): throw RPCError(.invalidArgument, "kind: \(value) is not a model kind")
        }
        let store = store
        try await heavy { try store.deleteDeployment(app: app, kind: kind) }
        return ClassificationV1.DeleteDeploymentResponse()
    }

    /// Pieces of the exported file; 1 MiB each stays far below the frame limit.
    static let exportChunk = 1 << 20

    public func exportModel(
        request: ClassificationV1.ExportModelRequest, response: ResponseWriter<ClassificationV1.ModelFileChunk>,
        context: ServerContext
    ) async throws {
        let name = try RequestValidation.name(request.name, field: "name")
        let format = try RequestValidation.exportFormat(request.format)
        let store = store
        // The whole container is read before its chunks go out, so it holds its size of the memory
        // budget until the last one has: exports nobody reads cannot take the process past it.
        let held = MemoryReservation(limits.memoryBudget)
        defer { held.releaseAll() }
        let size = try await heavy { try store.modelSize(named: name) }
        // An ONNX export holds the container and the graph written from it, about as big.
        guard held.grow(by: format == .onnx ? 2 * size : size) else {
            throw ClassificationError(
                .resourceExhausted,
                "the server's memory budget cannot hold model \(name) (\(size) bytes) for export now; retry later")
        }
        let stored = try await heavy { try store.modelBytes(named: name) }
        let bytes =
            format == .onnx ? try await heavy { try ONNXExport.export(ModelFile.decode(stored), name: name) } : stored
        var offset = 0
        repeat {
            let end = min(bytes.count, offset + Self.exportChunk)
            try await response.send(
                ClassificationV1.ModelFileChunk(
                    data: Array(bytes[offset..<end]), offset: Int64(offset), total: Int64(bytes.count)))
            offset = end
        } while offset < bytes.count
    }

    public func importModel(
        requests: RequestStream<ClassificationV1.ImportModelRequest>, context: ServerContext
    ) async throws -> ClassificationV1.ImportModelResponse {
        let held = MemoryReservation(limits.memoryBudget)
        defer { held.releaseAll() }
        let (first, data) = try await ModelImport.receive(
            requests, limit: limits.maxUploadBytes, held: held, patience: limits.budgetPatience)
        let plan = try RequestValidation.importModel(ONNXImportDefaults.filled(first, data: data), size: data.count)
        let store = store
        return try await heavy {
            let file = try ModelImport.file(plan, data: data)
            try store.saveModel(file, name: plan.name)
            return ClassificationV1.ImportModelResponse(model: try Self.modelSummary(store, plan.name))
        }
    }

    // MARK: Catalogue and feedback

    public func importCatalogue(request: ClassificationV1.ImportCatalogueRequest, context: ServerContext) async throws
        -> ClassificationV1.ImportCatalogueResponse
    {
        guard !request.json.isEmpty else {
            throw RPCError(.invalidArgument, "json: empty; give a JSON array of catalogue entries")
        }
        let store = store, json = request.json, app = try RequestValidation.optionalName(request.app, field: "app")
        return try await heavy {
            let entries = try CatalogueImport.parse(json)
            return ClassificationV1.ImportCatalogueResponse(
                entries: Int64(try store.importCatalogue(entries, app: store.catalogueApp(app))))
        }
    }

    public func searchCatalogue(request: ClassificationV1.SearchCatalogueRequest, context: ServerContext) async throws
        -> ClassificationV1.SearchCatalogueResponse
    {
        let limit = Int(request.limit ?? 100)
        guard (1...1000).contains(limit) else {
            throw RPCError(.invalidArgument, "limit must be 1…1000 (got \(limit))")
        }
        guard request.query.utf8.count <= 1000 else {
            throw RPCError(.invalidArgument, "query: longer than 1000 bytes")
        }
        let store = store, query = request.query, app = try RequestValidation.optionalName(request.app, field: "app")
        return try await heavy {
            ClassificationV1.SearchCatalogueResponse(
                entries: try store.searchCatalogue(query, app: store.catalogueApp(app), limit: limit).map(
                    ClassificationV1.CatalogueEntry.init))
        }
    }

    public func getCatalogueEntry(request: ClassificationV1.GetCatalogueEntryRequest, context: ServerContext)
        async throws -> ClassificationV1.CatalogueEntry
    {
        let label = try RequestValidation.name(request.label, field: "label")
        let store = store, app = try RequestValidation.optionalName(request.app, field: "app")
        return try await heavy {
            let app = try store.catalogueApp(app)
            guard let entry = try store.catalogueEntry(label: label, app: app) else {
                throw RPCError(.notFound, "no catalogue entry for label \(label) in app \(app)'s catalogue")
            }
            return ClassificationV1.CatalogueEntry(entry)
        }
    }

    public func feedback(request: ClassificationV1.FeedbackRequest, context: ServerContext) async throws
        -> ClassificationV1.FeedbackResponse
    {
        let label = try RequestValidation.name(request.label, field: "label")
        guard !request.image.isEmpty else { throw RPCError(.invalidArgument, "image: empty") }
        let model = request.model.isEmpty ? "" : try RequestValidation.name(request.model, field: "model")
        let predicted =
            request.predictedLabel.isEmpty
            ? "" : try RequestValidation.name(request.predictedLabel, field: "predicted_label")
        let store = store, image = request.image, pixelLimit = limits.pixelLimit
        // The labels are checked with or without consent: a label no model knows is a mistake either way.
        try await heavy { try store.checkFeedback(label: label, model: model, predictedLabel: predicted) }
        // Without consent the photo is not looked at, let alone kept.
        guard request.consent else { return ClassificationV1.FeedbackResponse(stored: false, dataset: "") }
        let dataset = try await heavy {
            try store.recordFeedback(
                image: image, label: label, consent: true, model: model, predictedLabel: predicted,
                pixelLimit: pixelLimit)
        }
        return ClassificationV1.FeedbackResponse(stored: dataset != nil, dataset: dataset ?? "")
    }
}

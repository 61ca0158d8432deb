import Base
import ClassificationAPI
import ClassificationCore
import ClassificationService
import Foundation
import Jobs
import JobsService
import RPC
import RPCTesting
import Schema
import Testing
import Torch
import WorkLane

/// The classification service's handlers over the in-process transport: the statuses its failures come back with.
@Suite struct ClassificationServiceTests {
    let store: ClassificationStore
    let client: ClassificationV1.Classification.Client
    let jobs: JobStore

    init(pixelLimit: Int = RGBImage.defaultPixelLimit, memoryBudget: MemoryBudget = .process) throws {
        store = try ClassificationStore.inMemory()
        let lane = ThreadPool(name: "lane", threads: 1, queueLimit: 8)
        jobs = try JobStore(database: store.database)
        let runner = JobRunner(store: jobs, lane: lane, failureMapping: JobsRPC.failure)
        var limits = ClassificationService.Limits()
        limits.torchThreads = 1
        limits.pixelLimit = pixelLimit
        limits.memoryBudget = memoryBudget
        let service = ClassificationService(store: store, lane: lane, jobs: runner, limits: limits)
        client = ClassificationV1.Classification.Client(
            wrapping: RPCClient(transports: [InProcessTransport(server: RPCServer(name: "classification", services: [service, JobsService(runner: runner)]))]))
    }

    static func failure(_ body: () async throws -> Void) async -> (StatusCode?, String) {
        do {
            try await body()
            return (nil, "")
        } catch let error as RPCError {
            return (error.code, error.message)
        } catch {
            return (.unknown, "\(error)")
        }
    }

    static func photo(_ colour: (UInt8, UInt8, UInt8), side: Int = 16) throws -> [UInt8] {
        try RGBImage(width: side, height: side, pixels: (0..<side * side).flatMap { _ in [colour.0, colour.1, colour.2] }).jpeg(quality: 95)
    }

    /// An imported TorchScript classifier scoring red, green and blue by their mean — that raises on a bright image,
    /// which the blank grey image of the import check is not.
    static let pickyModule = """
        def forward(self, x):
            if bool(x.max() > 0.9):
                return x.view(7, 11)
            return x.mean(dim=[2, 3])

        """

    /// A TorchScript module's failure on one image is the imported model's: INVALID_ARGUMENT naming it (it was
    /// INTERNAL, as any error libtorch raised), while images it takes are classified.
    @Test func anImportedModelFailingOnAnImageIsInvalidArgument() async throws {
        let module = try ScriptModule.compile(source: Self.pickyModule)
        let imported = try await client.importModel { writer in
            try await writer.send(ClassificationV1.ImportModelRequest(
                name: "picky", format: .torchscript, data: module, kind: .classifier, labels: ["red", "green", "blue"],
                inputWidth: 8, inputHeight: 8))
        }
        #expect(imported.model?.algorithm == "torchscript")
        let red = try await client.classify(ClassificationV1.ClassifyRequest(image: try Self.photo((200, 10, 10)), model: "picky", top: 1))
        #expect(red.labels.map(\.label) == ["red"])
        let (code, message) = await Self.failure {
            _ = try await client.classify(ClassificationV1.ClassifyRequest(image: try Self.photo((255, 255, 255)), model: "picky"))
        }
        #expect(code == .invalidArgument, "\(message)")
        #expect(message.contains("TorchScript model does not run"), "\(message)")
    }

    /// Issue 24: an export holds the whole model file while its chunks go out, so it takes the file's size of the
    /// memory budget first — refused with RESOURCE_EXHAUSTED when the budget cannot hold it (exports nobody reads
    /// took the process past its budget), and given back once the export is over.
    @Test func anExportHoldsItsModelsSizeOfTheMemoryBudget() async throws {
        let budget = MemoryBudget(limit: 64 << 10)
        let tests = try ClassificationServiceTests(memoryBudget: budget)
        let module = try ScriptModule.compile(source: Self.pickyModule)
        _ = try await tests.client.importModel { writer in
            try await writer.send(ClassificationV1.ImportModelRequest(
                name: "picky", format: .torchscript, data: module, kind: .classifier, labels: ["red", "green", "blue"],
                inputWidth: 8, inputHeight: 8))
        }
        var received = 0
        for try await chunk in tests.client.exportModel(ClassificationV1.ExportModelRequest(name: "picky"), options: CallOptions()) {
            received += chunk.data.count
        }
        #expect(received > 0 && received <= budget.limit, "an export of \(received) bytes")
        #expect(budget.used == 0, "the export gave back what it held")
        // The same export with most of the budget held elsewhere (other exports nobody reads).
        #expect(budget.reserve(budget.limit - received / 2))
        let (code, message) = await Self.failure {
            for try await _ in tests.client.exportModel(ClassificationV1.ExportModelRequest(name: "picky"), options: CallOptions()) {}
        }
        #expect(code == .resourceExhausted, "\(message)")
        #expect(message.contains("memory budget"), "\(message)")
        #expect(budget.used == budget.limit - received / 2, "the refused export holds nothing")
        // An import takes its file's bytes as they arrive: refused while the budget is held, nothing kept.
        let (importCode, importMessage) = await Self.failure {
            _ = try await tests.client.importModel { writer in
                try await writer.send(ClassificationV1.ImportModelRequest(
                    name: "picky2", format: .torchscript, data: module, kind: .classifier, labels: ["red", "green", "blue"],
                    inputWidth: 8, inputHeight: 8))
            }
        }
        #expect(importCode == .resourceExhausted, "\(importMessage)")
        #expect(budget.used == budget.limit - received / 2, "the refused import holds nothing")
        let models = try await tests.client.listModels(ClassificationV1.ListModelsRequest())
        #expect(models.models.map(\.name) == ["picky"])
    }

    /// Issue 24: a TorchScript zip bomb (a small file whose `data.pkl` declares hundreds of MiB) is refused from its
    /// central directory, before libtorch allocates what it declares; nothing is kept.
    @Test func aTorchScriptZipBombIsRefusedBeforeLoading() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("bomb-\(UUID().uuidString).pt").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        python.arguments = ["-c", """
            import sys, zipfile
            with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr("archive/data.pkl", b"\\0" * (256 << 20))
                z.writestr("archive/version", b"3\\n")
            """, path]
        try python.run()
        python.waitUntilExit()
        let bomb = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(bomb.count < 1 << 20, "\(bomb.count) bytes")
        let (code, message) = await Self.failure {
            _ = try await client.importModel { writer in
                try await writer.send(ClassificationV1.ImportModelRequest(
                    name: "bomb", format: .torchscript, data: bomb, kind: .classifier, labels: ["a", "b"], inputWidth: 8, inputHeight: 8))
            }
        }
        #expect(code == .invalidArgument, "\(message)")
        #expect(message.contains("zip bomb"), "\(message)")
        #expect(try store.models().isEmpty)
        // Not a zip at all: said so.
        let (plainCode, plain) = await Self.failure {
            _ = try await client.importModel { writer in
                try await writer.send(ClassificationV1.ImportModelRequest(
                    name: "text", format: .torchscript, data: Array("def forward(x): return x".utf8), kind: .classifier, labels: ["a", "b"],
                    inputWidth: 8, inputHeight: 8))
            }
        }
        #expect(plainCode == .invalidArgument && plain.contains("not a TorchScript module"), "\(plain)")
    }

    /// A module that does not run even on the blank image is refused at import, and nothing is kept.
    @Test func aModuleThatDoesNotRunIsRefusedAtImport() async throws {
        let module = try ScriptModule.compile(source: "def forward(self, x):\n    return x.view(7, 11)\n")
        let (code, message) = await Self.failure {
            _ = try await client.importModel { writer in
                try await writer.send(ClassificationV1.ImportModelRequest(
                    name: "broken", format: .torchscript, data: module, kind: .classifier, labels: ["a", "b"], inputWidth: 8, inputHeight: 8))
            }
        }
        #expect(code == .invalidArgument, "\(message)")
        #expect(try store.models().isEmpty)
    }

    /// A base that cannot serve (here a features model for a classifier) is the call's INVALID_ARGUMENT, naming the
    /// field, before any job starts (it was a job that failed after loading the dataset).
    @Test func aBaseThatCannotServeIsRefusedBeforeAnyJob() async throws {
        try store.saveDataset(try DatasetBuilder.classification(files: [
            ("red/a.jpg", try Self.photo((200, 10, 10))), ("red/b.jpg", try Self.photo((190, 20, 10))),
            ("blue/a.jpg", try Self.photo((10, 10, 200))), ("blue/b.jpg", try Self.photo((20, 10, 190))),
        ]), name: "colours")
        try store.saveModel(ModelFile(header: ModelHeader(kind: .classifier, algorithm: "features", labels: ["a", "b"], inputWidth: 16, inputHeight: 16),
                                      tensors: []), name: "hog")
        let (code, message) = await Self.failure {
            _ = try await client.train(ClassificationV1.TrainRequest(dataset: "colours", kind: .classifier, baseModel: "hog"))
        }
        #expect(code == .invalidArgument, "\(message)")
        #expect(message.hasPrefix("base_model: a classifier's base model must be"), "\(message)")
        #expect(try await jobs.list(limit: 10).jobs.isEmpty)
    }

    /// `transfer` on a service without its feature print (none configured, or a folder without one) is the call's
    /// FAILED_PRECONDITION saying how to install it, before any job.
    @Test func transferWithoutTheFeaturePrintSaysHowToInstallIt() async throws {
        try store.saveDataset(try DatasetBuilder.classification(files: [
            ("red/a.jpg", try Self.photo((200, 10, 10))), ("red/b.jpg", try Self.photo((190, 20, 10))),
            ("blue/a.jpg", try Self.photo((10, 10, 200))), ("blue/b.jpg", try Self.photo((20, 10, 190))),
        ]), name: "colours")
        let (code, message) = await Self.failure {
            _ = try await client.train(ClassificationV1.TrainRequest(dataset: "colours", kind: .classifier, algorithm: "transfer"))
        }
        #expect(code == .failedPrecondition, "\(message)")
        #expect(message.contains("the feature print is not installed") && message.contains("compose/compose up"), "\(message)")
        #expect(try await jobs.list(limit: 10).jobs.isEmpty)
    }

    /// --batch-size and --patience are the cnn's, in range, and patience needs validation images: INVALID_ARGUMENT
    /// naming the field otherwise, before any job.
    @Test func batchSizeAndPatienceAreChecked() async throws {
        let cases: [(ClassificationV1.TrainRequest, String)] = [
            (ClassificationV1.TrainRequest(dataset: "d", kind: .classifier, algorithm: "cnn", batchSize: 0), "batch_size must be 1…4096"),
            (ClassificationV1.TrainRequest(dataset: "d", kind: .classifier, algorithm: "features", batchSize: 8), "batch_size: only the cnn"),
            (ClassificationV1.TrainRequest(dataset: "d", kind: .classifier, algorithm: "transfer", patience: 3), "patience: early stopping applies to the cnn"),
            (ClassificationV1.TrainRequest(dataset: "d", kind: .classifier, algorithm: "cnn", validationFraction: 0, patience: 3), "needs validation images"),
            (ClassificationV1.TrainRequest(dataset: "d", kind: .classifier, algorithm: "cnn", patience: 0), "patience must be 1…1000"),
        ]
        for (request, expected) in cases {
            let (code, message) = await Self.failure { _ = try await client.train(request) }
            #expect(code == .invalidArgument && message.contains(expected), "\(message)")
        }
    }

    /// Feedback photos are checked against the service's configured pixel limit (they were decoded with the default).
    @Test func feedbackKeepsToTheConfiguredPixelLimit() async throws {
        let limited = try ClassificationServiceTests(pixelLimit: 100)
        let (code, message) = await Self.failure {
            _ = try await limited.client.feedback(ClassificationV1.FeedbackRequest(image: try Self.photo((0, 0, 200), side: 16), label: "blue", consent: true))
        }
        #expect(code == .invalidArgument, "\(message)")
        #expect(message.contains("exceeds the limit of 100 pixels"), "\(message)")
        #expect(try limited.store.datasets().isEmpty)
        let small = try await limited.client.feedback(
            ClassificationV1.FeedbackRequest(image: try Self.photo((0, 0, 200), side: 8), label: "blue", consent: true))
        #expect(small.stored)
    }
}

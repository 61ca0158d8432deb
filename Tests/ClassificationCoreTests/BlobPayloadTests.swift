import Base
import BlobStore
import ClassificationCore
import Foundation
import Storage
import StorageTestSupport
import TLS
import Testing

/// The cluster's layout: images and model files in a blob store by content hash, the rows naming them by hash.
@Suite struct BlobPayloadTests {
    final class Scratch {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "classification-blobs-\(UUID().uuidString)"
        ).path
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    @Test func imagesModelsAndFeedbackGoToTheBlobStoreAndComeBack() throws {
        let scratch = Scratch()
        let blobs = try BlobStore(directory: scratch.path)
        let store = try ClassificationStore.inMemory(blobs: blobs, using: .testBackend)
        let dataset = try DatasetBuilder.classification(files: [
            ("red/a.png", DatasetTests.red), ("red/b.png", DatasetTests.red2),
            ("blue/a.png", DatasetTests.blue), ("blue/b.png", DatasetTests.blue2),
        ])
        try store.saveDataset(dataset, name: "colours")
        #expect(
            try store.database.read { try $0.queryOne("SELECT COUNT(*) FROM images WHERE length(bytes) = 0")?.int(0) }
                == 4,
            "the rows keep no bytes")
        for hash in dataset.images.keys { #expect(blobs.has(hash)) }
        let loaded = try store.dataset(named: "colours")
        #expect(loaded.samples == dataset.samples && loaded.images == dataset.images)

        let header = ModelHeader(
            kind: .classifier, algorithm: "features", labels: ["blue", "red"], inputWidth: 8, inputHeight: 8)
        let file = ModelFile(header: header, tensors: [NamedArray(name: "x", shape: [1], values: [1])])
        try store.saveModel(file, name: "m1")
        let row = try store.database.read {
            try $0.queryOne("SELECT length(file), file_hash, size FROM models WHERE name = 'm1'")
        }
        let encoded = try file.encoded()
        #expect(row?.int(0) == 0 && row?.string(1) == SHA256.hex(encoded) && row?.int(2) == encoded.count)
        #expect(try store.model(named: "m1") == file)
        #expect(try store.modelSize(named: "m1") == encoded.count)
        #expect(try store.models().map(\.header) == [header])

        try store.recordFeedback(image: DatasetTests.blue, label: "blue", consent: true)
        #expect(
            Set(try store.blobHashes()) == Set(dataset.images.keys).union([SHA256.hex(encoded)]),
            "what the repair keeps on two nodes")
        #expect(try store.feedbackDataset()?.images == [SHA256.hex(DatasetTests.blue): DatasetTests.blue])

        // A blob lost from every node: the read fails, naming it, rather than answering a dataset without it.
        let lost = dataset.images.keys.sorted()[0]
        try FileManager.default.removeItem(atPath: blobs.path(of: lost))
        #expect { _ = try store.dataset(named: "colours") } throws: { ($0 as? BlobError)?.category == .notFound }
    }

    /// Rows with their bytes inline (a single machine's file imported into a cluster) are read as they are, beside
    /// rows by hash; and a replica without a blob store says why it cannot read the latter.
    @Test func inlineRowsAndHashRowsLiveTogether() throws {
        let scratch = Scratch()
        let database = try Database.scratch(migrations: ClassificationStore.migrations)
        let single = ClassificationStore(database: database)
        let header = ModelHeader(kind: .classifier, algorithm: "features", labels: ["a"], inputWidth: 8, inputHeight: 8)
        let file = ModelFile(header: header, tensors: [NamedArray(name: "x", shape: [1], values: [2])])
        try single.saveModel(file, name: "inline")
        try single.saveDataset(
            try DatasetBuilder.classification(files: [
                ("red/a.png", DatasetTests.red), ("red/b.png", DatasetTests.red2), ("blue/a.png", DatasetTests.blue),
                ("blue/b.png", DatasetTests.blue2),
            ]), name: "old")

        let clustered = ClassificationStore(database: database, blobs: try BlobStore(directory: scratch.path))
        try clustered.saveModel(file, name: "hashed")
        #expect(try clustered.model(named: "inline") == file)
        #expect(try clustered.model(named: "hashed") == file)
        #expect(try clustered.dataset(named: "old").images.count == 4)
        #expect(try clustered.models().map(\.name) == ["hashed", "inline"])
        #expect { _ = try single.model(named: "hashed") } throws: {
            ($0 as? ClassificationError)?.category == .internal
        }
    }
}

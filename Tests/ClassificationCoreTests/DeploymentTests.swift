import Base
import Foundation
import Storage
import StorageTestSupport
import Testing

@testable import ClassificationCore

/// Models per app: an app answers only with the model an admin pointed it at; a stored model serves nobody until then.
@Suite struct DeploymentTests {
    static func file(_ labels: [String], kind: ModelHeader.Kind = .classifier) -> ModelFile {
        ModelFile(
            header: ModelHeader(kind: kind, algorithm: "features", labels: labels, inputWidth: 8, inputHeight: 8),
            tensors: [NamedArray(name: "x", shape: [1], values: [1])])
    }

    /// A stored model became its kind's active model when it was the first (`INSERT OR IGNORE INTO active_models`),
    /// so on a fresh stack a user's training served everyone; and one slot per kind let a clover model answer a dog
    /// photo. Now nothing is served until set, each app by its own model.
    @Test func appsAnswerOnlyWithTheirOwnModels() throws {
        let store = try ClassificationStore.inMemory(using: .testBackend)
        try store.saveModel(Self.file(["3_leaf", "4_leaf"]), name: "clover-1")
        #expect(
            throws: ClassificationError(
                .failedPrecondition,
                "no app has a classifier yet; give a model, or an admin sets an app's: gateway classify deployment set APP MODEL"
            )
        ) {
            try store.deployedModel(app: nil, kind: .classifier)
        }
        try store.setDeployment(app: "clovers", model: "clover-1")
        // One app: a call naming none is answered, as before apps.
        #expect(try store.deployedModel(app: nil, kind: .classifier) == ("clovers", "clover-1"))
        try store.saveModel(Self.file(["beagle", "golden"]), name: "dogs-1")
        // a training changes nothing
        #expect(try store.deployedModel(app: nil, kind: .classifier) == ("clovers", "clover-1"))
        try store.setDeployment(app: "dogs", model: "dogs-1")
        #expect(try store.deployedModel(app: "dogs", kind: .classifier) == ("dogs", "dogs-1"))
        #expect(try store.deployedModel(app: "clovers", kind: .classifier) == ("clovers", "clover-1"))
        #expect(
            throws: ClassificationError(
                .failedPrecondition, "2 apps have a classifier (clovers, dogs); name the one to answer for (app)")
        ) {
            try store.deployedModel(app: nil, kind: .classifier)
        }
        #expect(throws: ClassificationError(.notFound, "no app named cats (apps: clovers, dogs)")) {
            try store.deployedModel(app: "cats", kind: .classifier)
        }
        #expect(
            throws: ClassificationError(
                .failedPrecondition,
                "app dogs has no detector; an admin sets one: gateway classify deployment set dogs MODEL")
        ) {
            try store.deployedModel(app: "dogs", kind: .detector)
        }
        #expect(try store.models().map(\.apps) == [["clovers"], ["dogs"]])

        // Repointing: an admin's decision, in place.
        try store.saveModel(Self.file(["beagle", "golden"]), name: "dogs-2")
        try store.setDeployment(app: "dogs", model: "dogs-2")
        #expect(try store.deployedModel(app: "dogs", kind: .classifier).model == "dogs-2")
        #expect(throws: ClassificationError(.notFound, "no model named nope")) {
            try store.setDeployment(app: "dogs", model: "nope")
        }

        // The model an app points at deleted: the app has none (not whatever is stored next under that name).
        try store.deleteModel(named: "dogs-2")
        try store.saveModel(Self.file(["x", "y"]), name: "dogs-2")
        #expect(
            throws: ClassificationError(
                .failedPrecondition,
                "app dogs has no classifier: its model was deleted; an admin sets one: gateway classify deployment set dogs MODEL"
            )
        ) {
            try store.deployedModel(app: "dogs", kind: .classifier)
        }
        #expect(try store.deployments().map(\.model) == ["clover-1", nil])
        try store.deleteDeployment(app: "dogs")
        #expect(throws: ClassificationError(.notFound, "app dogs has no model")) {
            try store.deleteDeployment(app: "dogs")
        }
        #expect(try store.deployedModel(app: nil, kind: .classifier) == ("clovers", "clover-1"))
        #expect(try store.catalogueApp(nil) == "clovers")
    }

    /// A stack from before apps, with an active model per kind and a catalogue, answers as before after migration:
    /// both models are the app `default`'s, the catalogue too, and a call naming no app finds them.
    @Test func migrationKeepsOneActiveModelPerKind() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "classification-\(UUID().uuidString).sqlite"
        ).path
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let old = ClassificationStore(
                database: try Database(path: path, migrations: Array(ClassificationStore.migrations.prefix(5))))
            for (name, kind) in [("c", ModelHeader.Kind.classifier), ("d", .detector), ("c2", .classifier)] {
                try old.database.write { db in
                    try db.execute(
                        "INSERT INTO models (name, kind, algorithm, created_at, size, file) VALUES (?, ?, 'features', 0, 1, ?)",
                        [name, kind.rawValue, try Self.file(["a", "b"], kind: kind).encoded()])
                }
            }
            try old.database.write { db in
                try db.execute("INSERT INTO active_models (kind, model) VALUES ('classifier', 'c'), ('detector', 'd')")
                try db.execute(
                    """
                    INSERT INTO catalogue (label, name, local_name, attributes, search) VALUES ('a', 'A', 'Á', '{"size":"s","fur":"f"}', 'a')
                    """)
            }
        }
        let store = try ClassificationStore(path: path)
        #expect(try store.deployedModel(app: nil, kind: .classifier) == ("default", "c"))
        #expect(try store.deployedModel(app: nil, kind: .detector) == ("default", "d"))
        #expect(try store.models().map(\.active) == [true, false, true])
        let entry = try store.catalogueEntry(label: "a", app: try store.catalogueApp(nil))
        #expect(entry?.localName == "Á" && entry?.attributes == [.init("fur", "f"), .init("size", "s")])
    }
}

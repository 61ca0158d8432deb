import ClassificationAPI
import ClassificationCore
import ClassificationService
import Foundation
import Jobs
import RPC
import Schema
import Testing
import Torch

/// Models and catalogues per app, through the service: an answer comes only from the app's model, and the dog seed's
/// breed file imports as it was written.
@Suite struct AppsTests {
    /// Scores its three outputs by the colour channels' means: red wins on a red photo, whatever the labels are called.
    static let meanModule = """
        def forward(self, x):
            return x.mean(dim=[2, 3])

        """

    static func importModel(_ client: ClassificationV1.Classification.Client, _ name: String, labels: [String])
        async throws
    {
        let module = try ScriptModule.compile(source: Self.meanModule)
        _ = try await client.importModel { writer in
            try await writer.send(
                ClassificationV1.ImportModelRequest(
                    name: name, format: .torchscript, data: module, kind: .classifier, labels: labels, inputWidth: 8,
                    inputHeight: 8))
        }
    }

    /// The dog seed's breed file as the app has it (two of its breeds).
    static let seedBreeds = """
        [{"id": 1, "breed": "Golden Retriever", "breedCZ": "Zlatý retrívr", "fur": "dlouhá", "size": "velký", "weight": "25–34 kg",
          "height": "51–61 cm", "color": "zlatá", "avgAge": 11, "originCountry": "Skotsko", "imageName": "golden.jpg"},
         {"id": 2, "breed": "Beagle", "breedCZ": "Bígl", "fur": "krátká", "size": "střední", "weight": "9–11 kg",
          "height": "33–41 cm", "color": "trikolóra", "avgAge": 13, "originCountry": "Anglie", "imageName": "beagle.jpg"}]
        """

    /// Issue 41: a dog photo answered "3_leaf" from the clover model that happened to be active, and on a fresh stack
    /// the first user's training served every anonymous caller. Now a stored model serves no app until an admin
    /// points one at it, each app answers with its own, and naming none with two apps is FAILED_PRECONDITION.
    @Test func eachAppAnswersWithItsOwnModelAndCatalogue() async throws {
        let tests = try ClassificationServiceTests()
        let client = tests.client
        let red = try ClassificationServiceTests.photo((220, 120, 10))  // red > green > blue
        try await Self.importModel(client, "clover-1", labels: ["3_leaf", "4_leaf", "grass"])
        var (code, message) = await ClassificationServiceTests.failure {
            _ = try await client.classify(.init(image: red))
        }
        #expect(code == .failedPrecondition && message.contains("gateway classify deployment set"), "\(message)")

        _ = try await client.setDeployment(.init(app: "clovers", model: "clover-1"))
        // one app: no name needed
        #expect(try await client.classify(.init(image: red)).labels.first?.label == "3_leaf")
        try await Self.importModel(client, "dogs-1", labels: ["Golden Retriever", "Beagle", "Husky"])
        #expect(try await client.classify(.init(image: red)).model == "clover-1")  // a new model changes nothing
        let deployed = try await client.setDeployment(.init(app: "dogs", model: "dogs-1"))
        #expect(deployed.kind == .classifier && deployed.model == "dogs-1")
        (code, message) = await ClassificationServiceTests.failure { _ = try await client.classify(.init(image: red)) }
        #expect(code == .failedPrecondition && message.contains("clovers, dogs"), "\(message)")

        _ = try await client.importCatalogue(.init(json: Array(Self.seedBreeds.utf8), app: "dogs"))
        let dog = try await client.classify(.init(image: red, top: 2, app: "dogs"))
        #expect(dog.model == "dogs-1" && dog.labels.map(\.label) == ["Golden Retriever", "Beagle"])
        #expect(dog.entry?.localName == "Zlatý retrívr")
        #expect(
            dog.entry?.attributes.map(\.key) == [
                "id", "fur", "size", "weight", "height", "color", "avgAge", "originCountry", "imageName",
            ])
        // the dogs' catalogue is theirs
        #expect(try await client.classify(.init(image: red, app: "clovers")).entry == nil)
        (code, message) = await ClassificationServiceTests.failure {
            _ = try await client.classify(.init(image: red, app: "cats"))
        }
        #expect(code == .notFound && message.contains("clovers, dogs"), "\(message)")

        let models = try await client.listModels(.init()).models
        #expect(models.map(\.apps) == [["clovers"], ["dogs"]] && models.allSatisfy(\.active))
        #expect(try await client.listDeployments(.init()).deployments.map(\.app) == ["clovers", "dogs"])

        // The model an app points at deleted: the app has none, and the error says how an admin sets one.
        _ = try await client.deleteModel(.init(name: "dogs-1"))
        (code, message) = await ClassificationServiceTests.failure {
            _ = try await client.classify(.init(image: red, app: "dogs"))
        }
        #expect(
            code == .failedPrecondition && message.contains("gateway classify deployment set dogs MODEL"), "\(message)")
        _ = try await client.deleteDeployment(.init(app: "dogs"))
        #expect(try await client.classify(.init(image: red)).model == "clover-1")
    }

    /// The catalogue as the app wrote it: the dog seed's file with no option; the service's own JSON in both spellings
    /// (proto names and lowerCamelCase: `localName` was dropped and the English name shown instead); an unknown key
    /// refused naming it (it was dropped without a word); attributes in the file's order (they came back sorted).
    @Test func catalogueFilesImportAsWritten() async throws {
        let tests = try ClassificationServiceTests()
        let client = tests.client
        func entry(_ label: String) async throws -> ClassificationV1.CatalogueEntry {
            try await client.getCatalogueEntry(.init(label: label, app: "dogs"))
        }
        #expect(try await client.importCatalogue(.init(json: Array(Self.seedBreeds.utf8), app: "dogs")).entries == 2)
        let beagle = try await entry("Beagle")
        #expect(beagle.name == "Beagle" && beagle.localName == "Bígl")
        #expect(
            beagle.attributes.map { "\($0.key)=\($0.value)" } == [
                "id=2", "fur=krátká", "size=střední", "weight=9–11 kg", "height=33–41 cm", "color=trikolóra",
                "avgAge=13",
                "originCountry=Anglie", "imageName=beagle.jpg",
            ])

        // What `catalogue search --json` prints imports back as it was (lowerCamelCase, attributes as [{key, value}]).
        let printed = try await client.searchCatalogue(.init(app: "dogs")).jsonString(
            options: ProtoJSONOptions(emitDefaults: true))
        #expect(printed.contains("\"localName\""))
        #expect(try await client.importCatalogue(.init(json: Array(printed.utf8), app: "copy")).entries == 2)
        #expect(try await client.getCatalogueEntry(.init(label: "Beagle", app: "copy")) == beagle)

        let protoNames =
            #"[{"label": "akita", "name": "Akita Inu", "local_name": "Akita", "attributes": {"size": "velký", "fur": "krátká"}}]"#
        _ = try await client.importCatalogue(.init(json: Array(protoNames.utf8), app: "dogs"))
        #expect(try await entry("akita").attributes.map(\.key) == ["size", "fur"])
        let camel = #"[{"label": "pug", "name": "Pug", "localName": "Mops"}]"#
        _ = try await client.importCatalogue(.init(json: Array(camel.utf8), app: "dogs"))
        #expect(try await entry("pug").localName == "Mops")

        for (json, expected) in [
            (#"[{"label": "x", "locale_name": "X", "notes": "y"}]"#, "catalogue[0]: unknown keys locale_name, notes"),
            (#"[{"name": "x"}]"#, "catalogue[0].label: missing"),
            (#"[{"label": "x", "local_name": "a", "localName": "b"}]"#, "local_name and localName both given"),
            (#"[{"breed": "x", "label": "y"}]"#, "catalogue[0]: label beside breed"),
            (#"[{"breed": "x", "fur": ["a"]}]"#, "catalogue[0].fur: a list or object"),
            ("[{", "catalogue: invalid JSON"),
        ] {
            let (code, message) = await ClassificationServiceTests.failure {
                _ = try await client.importCatalogue(.init(json: Array(json.utf8), app: "dogs"))
            }
            #expect(code == .invalidArgument && message.contains(expected), "\(json): \(message)")
        }
        // No app has a model yet: a catalogue call naming none is the default app's (a fresh stack's first import, as
        // before apps existed), and "dogs" keeps its own.
        _ = try await client.importCatalogue(.init(json: Array(#"[{"label": "3", "name": "Three"}]"#.utf8)))
        #expect(try await client.searchCatalogue(.init()).entries.map(\.label) == ["3"])
        #expect(try await client.searchCatalogue(.init(app: "default")).entries.map(\.label) == ["3"])
        #expect(try await client.searchCatalogue(.init(app: "dogs")).entries.allSatisfy { $0.label != "3" })
    }
}

/// The apps' models are loaded and warmed before their first call (at start, and when an admin sets one), so that
/// call is not the one paying for the model's load and libtorch's first forward (1.5–2.4 s on a transfer model).
@Suite struct WarmAppsTests {
    @Test func appsModelsAreLoadedBeforeTheirFirstCall() async throws {
        let tests = try ClassificationServiceTests()
        try await AppsTests.importModel(tests.client, "m", labels: ["r", "g", "b"])
        try await AppsTests.importModel(tests.client, "unused", labels: ["r", "g", "b"])
        // as another replica would: this one has not loaded it
        try tests.store.setDeployment(app: "colours", model: "m")
        var limits = ClassificationService.Limits()
        limits.torchThreads = 1
        let service = ClassificationService(
            store: tests.store, lane: tests.lane, jobs: JobRunner(store: tests.jobs, lane: tests.lane), limits: limits)
        #expect(try await service.warmApps() == ["m"])
        #expect(try await service.warmApps() == [])  // kept: nothing to load again
    }
}

import ClassificationAPI
import ClassificationCore
import Foundation
import Schema

extension ClassificationV1.ModelSummary {
    init(_ model: ClassificationStore.ModelSummary) {
        self.init()
        let header = model.header
        name = model.name
        kind = header.kind == .classifier ? .classifier : .detector
        algorithm = header.algorithm
        labels = header.labels
        inputWidth = Int32(header.inputWidth)
        inputHeight = Int32(header.inputHeight)
        trainingAccuracy = header.trainingAccuracy
        validationAccuracy = header.validationAccuracy
        map50 = header.metrics["map50"]
        map5095 = header.metrics["map50_95"]
        detectConfidence =
            header.kind == .detector ? header.metrics[DetectorEvaluation.calibratedConfidenceMetric] : nil
        trainingImages = header.metrics["training_images"].map { Int64($0) }
        trainingSeconds = header.trainingSeconds ?? 0
        size = Int64(model.size)
        createdAt = model.createdAt.timeIntervalSince1970
        active = model.active
        apps = model.apps
        interrupted = header.interrupted ?? ""
        fineTuned = header.fineTuned ?? false
        cropClassifier = header.cropClassifier != nil
        history = (header.history ?? []).map {
            ClassificationV1.TrainingEpoch(
                pass: Int32($0.pass), epoch: Int32($0.epoch), loss: $0.loss,
                trainingAccuracy: $0.trainingAccuracy, validationAccuracy: $0.validationAccuracy)
        }
    }
}

extension ClassificationV1.CatalogueEntry {
    init(_ entry: ClassificationCore.CatalogueEntry) {
        self.init()
        label = entry.label
        name = entry.name
        localName = entry.localName
        attributes = entry.attributes.map { ClassificationV1.Attribute(key: $0.key, value: $0.value) }
    }
}

extension ClassificationV1.Deployment {
    init(_ deployment: ClassificationCore.Deployment) {
        self.init()
        app = deployment.app
        kind = deployment.kind == .classifier ? .classifier : .detector
        model = deployment.model ?? ""
        updatedAt = deployment.updatedAt.timeIntervalSince1970
    }
}

import ArgumentParser
import ClassificationAPI
import Foundation
import GatewayKit
import RPC
import Schema

/// `gateway classify deployment …`: which model answers for each app. Setting and removing is the admin's.
struct DeploymentCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deployment",
        abstract: "Apps and the models that answer for them: set, list, delete (an admin's).",
        discussion: """
            An app (the dog-breed app, the clover app) has a classifier and a detector, each a model an admin points \
            it at; `image --app NAME` and `detect --app NAME` are answered by them only, and with the app's catalogue. \
            A model trained or imported answers for no app until it is set here.
            """,
        subcommands: [DeploymentSet.self, DeploymentList.self, DeploymentDelete.self])
}

struct DeploymentSet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Point an app's classifier or detector (the model's kind) at a model.",
        discussion: "--json prints the Deployment: {\"app\", \"kind\", \"model\", \"updatedAt\"}.")
    @Argument(help: "The app's name.") var app: String
    @Argument(help: "The model that answers for it.") var model: String
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let d = try await client.setDeployment(
                ClassificationV1.SetDeploymentRequest(app: app, model: model), options: global.callOptions)
            try global.render(d, text: { print("app \(d.app)'s \(modelKindName(d.kind)) is now \(d.model)") })
        }
    }
}

struct DeploymentList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Every app with its classifier and detector.")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withClassification { client in
            let r = try await client.listDeployments(
                ClassificationV1.ListDeploymentsRequest(), options: global.callOptions)
            try global.render(
                r,
                text: {
                    printTable(
                        ["APP", "KIND", "MODEL"],
                        r.deployments.map {
                            [$0.app, modelKindName($0.kind), $0.model.isEmpty ? "(deleted)" : $0.model]
                        })
                })
        }
    }
}

struct DeploymentDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Remove an app's classifier and detector (or one: --kind); the models stay.",
        discussion: "--json prints the empty DeleteDeploymentResponse: {}.")
    @Argument(help: "The app's name.") var app: String
    @Option(help: "Only this kind: classifier or detector (default: both).") var kind: DeploymentKind?
    @OptionGroup var global: GlobalOptions

    enum DeploymentKind: String, CaseIterable, ExpressibleByArgument { case classifier, detector }

    func run() async throws {
        try await global.withClassification { client in
            let request = ClassificationV1.DeleteDeploymentRequest(
                app: app, kind: kind.map { $0 == .classifier ? .classifier : .detector } ?? .unspecified)
            let reply = try await client.deleteDeployment(request, options: global.callOptions)
            try global.render(reply, text: { print("app \(app)'s \(kind?.rawValue ?? "models") removed") })
        }
    }
}

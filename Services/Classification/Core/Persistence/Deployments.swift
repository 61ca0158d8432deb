import Base
import Foundation
import Storage

/// Models per app. An app (the dog-breed app, the clover app) is a name an admin points at a model, once for its
/// classifier and once for its detector — an alias, as an iOS app bundles its own Core ML models. A client names the
/// app it classifies for and is answered only by that app's model; a call naming none is answered when exactly one app
/// has a model of that kind. Storing a model (training, import) points no app at it: what an app's callers get is an
/// admin's decision, never a side effect of a user's training.
public struct Deployment: Sendable, Equatable {
    public var app: String
    public var kind: ModelHeader.Kind
    /// Nil once the model it named was deleted: the app then has no model until an admin sets one.
    public var model: String?
    public var updatedAt: Date

    public init(app: String, kind: ModelHeader.Kind, model: String?, updatedAt: Date) {
        self.app = app
        self.kind = kind
        self.model = model
        self.updatedAt = updatedAt
    }
}

extension ClassificationStore {
    /// The app of a stack from before apps (migration 6): its active models became this app's.
    public static let defaultApp = "default"

    /// How an admin points an app at a model, for the errors that send a caller there.
    public static func deployHint(app: String = "APP") -> String { "gateway classify deployment set \(app) MODEL" }

    /// Points `app`'s model of `model`'s kind at `model` (created or repointed). Unknown model NOT_FOUND.
    @discardableResult
    public func setDeployment(app: String, model: String) throws -> Deployment {
        try Self.validName(app, "app")
        return try database.write { db in
            guard let row = try db.queryOne("SELECT kind FROM models WHERE name = ?", [model]),
                let kind = ModelHeader.Kind(rawValue: row.string(0) ?? "")
            else {
                throw ClassificationError(.notFound, "no model named \(model)")
            }
            let now = Date()
            try db.execute(
                """
                INSERT INTO deployments (app, kind, model, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (app, kind) DO UPDATE SET model = excluded.model, updated_at = excluded.updated_at
                """, [app, kind.rawValue, model, now.timeIntervalSince1970])
            return Deployment(app: app, kind: kind, model: model, updatedAt: now)
        }
    }

    /// Every app's models, by app then kind.
    public func deployments() throws -> [Deployment] {
        try database.read { db in
            try db.query("SELECT app, kind, model, updated_at FROM deployments ORDER BY app, kind").map { r in
                Deployment(
                    app: r.string(0) ?? "", kind: ModelHeader.Kind(rawValue: r.string(1) ?? "") ?? .classifier,
                    model: r.string(2), updatedAt: Date(timeIntervalSince1970: r.double(3) ?? 0))
            }
        }
    }

    /// Removes an app's model of `kind`, or with nil both of its kinds; an app with none is NOT_FOUND. The models stay.
    public func deleteDeployment(app: String, kind: ModelHeader.Kind? = nil) throws {
        try database.write { db in
            try db.execute(
                "DELETE FROM deployments WHERE app = ?1 AND (?2 IS NULL OR kind = ?2)", [app, kind?.rawValue])
            guard db.changes > 0 else {
                throw ClassificationError(.notFound, "app \(app) has no \(kind.map(\.rawValue) ?? "model")")
            }
        }
    }

    /// The apps there are (with any model, or one deleted under them), sorted.
    public func apps() throws -> [String] { Array(Set(try deployments().map(\.app))).sorted() }

    /// The model that answers for `app` (nil: the only app with a model of `kind`). An unknown app is NOT_FOUND
    /// naming the apps; an app without a model of that kind, several apps and none named, or an app whose model was
    /// deleted, FAILED_PRECONDITION saying what to give or how an admin sets one.
    public func deployedModel(app: String?, kind: ModelHeader.Kind) throws -> (app: String, model: String) {
        let all = try deployments()
        let ofKind = all.filter { $0.kind == kind }
        let deployment: Deployment
        if let app {
            guard let found = ofKind.first(where: { $0.app == app }) else {
                let apps = Set(all.map(\.app)).sorted()
                if apps.contains(app) {
                    throw ClassificationError(
                        .failedPrecondition,
                        "app \(app) has no \(kind.rawValue); an admin sets one: \(Self.deployHint(app: app))")
                }
                throw ClassificationError(
                    .notFound,
                    "no app named \(app)"
                        + (apps.isEmpty ? " (there are no apps yet)" : " (apps: \(apps.joined(separator: ", ")))"))
            }
            deployment = found
        } else {
            switch ofKind.count {
            case 0:
                throw ClassificationError(
                    .failedPrecondition,
                    "no app has a \(kind.rawValue) yet; give a model, or an admin sets an app's: \(Self.deployHint())")
            case 1:
                deployment = ofKind[0]
            default:
                throw ClassificationError(
                    .failedPrecondition,
                    "\(ofKind.count) apps have a \(kind.rawValue) (\(ofKind.map(\.app).joined(separator: ", "))); name the one to answer for (app)"
                )
            }
        }
        guard let model = deployment.model else {
            throw ClassificationError(
                .failedPrecondition,
                "app \(deployment.app) has no \(kind.rawValue): its model was deleted; an admin sets one: \(Self.deployHint(app: deployment.app))"
            )
        }
        return (deployment.app, model)
    }

    /// The app a catalogue call is for: `app` when given, else the only app there is (of any kind), else — no app yet —
    /// `default`, the app `SetActiveModel` and a stack of one app use; several is FAILED_PRECONDITION naming them. A
    /// catalogue may be imported for an app before it has a model.
    public func catalogueApp(_ app: String?) throws -> String {
        if let app {
            try Self.validName(app, "app")
            return app
        }
        let apps = try self.apps()
        guard apps.count <= 1 else {
            throw ClassificationError(
                .failedPrecondition,
                "\(apps.count) apps (\(apps.joined(separator: ", "))); name the one whose catalogue this is (app)")
        }
        return apps.first ?? Self.defaultApp
    }
}

import Foundation
import TestSupport
import Testing

/// Who may change what, end to end: the stack's admin token (compose's state), users made with `gateway user`,
/// and strangers, over plain HTTP (curl, as a browser or a script would call) and through the gateway. Without
/// the tests' own admin token (`Stack.adminToken`): compose makes the stack's, and the gateway finds it in the state.
@Suite(.serialized) struct AuthorizationStackTests {
    static let noAdminToken = ["MENAGERIE_ADMIN_TOKEN": ""]

    /// `compose/compose ARGS` and the gateway as the operator beside the stack (no token in the environment).
    static func compose(_ stack: Stack, _ arguments: String...) async throws -> (status: Int32, output: String) {
        try await stack.compose(environment: noAdminToken, arguments)
    }

    static func operatorGateway(_ stack: Stack, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await Stack.run(
            "\(Stack.binDirectory)/gateway", arguments + ["--state", stack.state.path],
            environment: stack.environment.merging(noAdminToken) { $1 })
    }

    /// One Connect unary call with curl: the HTTP status and the JSON body.
    static func call(_ port: Int, _ path: String, _ body: String, token: String? = nil) async throws -> (
        status: Int, body: [String: Any]
    ) {
        var arguments = ["-s", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "--data-binary", body]
        if let token { arguments += ["-H", "Authorization: Bearer \(token)"] }
        let run = try await Stack.run(
            "/usr/bin/curl", arguments + ["http://127.0.0.1:\(port)\(path)"], environment: [:])
        let lines = run.output.split(separator: "\n", omittingEmptySubsequences: false)
        let status = Int(lines.last ?? "") ?? 0
        let json = lines.dropLast().joined(separator: "\n")
        return (status, (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:])
    }

    /// The gateway as `token`'s user (`MENAGERIE_TOKEN`).
    static func gateway(_ stack: Stack, as token: String, _ arguments: [String]) async throws -> (
        status: Int32, output: String
    ) {
        try await Stack.run(
            "\(Stack.binDirectory)/gateway", arguments + ["--state", stack.state.path],
            environment: stack.environment.merging(["MENAGERIE_TOKEN": token, "MENAGERIE_ADMIN_TOKEN": ""]) { $1 })
    }

    static func newUser(_ stack: Stack, _ name: String, _ extra: [String] = []) async throws -> String {
        let created = try await Self.operatorGateway(stack, ["user", "create", name] + extra)
        try #require(created.status == 0, "\(created.output)")
        return try #require(created.output.split(separator: "\n").last.map(String.init))
    }

    static let template =
        #"{"name":"meter","values":[{"name":"reading","region":{"x":0.1,"y":0.1,"width":0.5,"height":0.2}}]}"#

    @Test func strangersAreRefusedUsersSeeOnlyTheirOwnAndTheAdminMayChangeSharedData() async throws {
        try await Stack.with(services: ["zoo", "ocr", "health"]) { stack in
            let up = try await Self.compose(stack, "up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let admin = try String(contentsOf: stack.state.appendingPathComponent("admin-token"), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let attributes = try FileManager.default.attributesOfItem(
                atPath: stack.state.appendingPathComponent("admin-token").path)
            #expect(
                (attributes[.posixPermissions] as? Int).map { $0 & 0o077 } == 0, "the admin token is readable by others"
            )
            let zoo = stack.basePorts["zoo"]!, ocr = stack.basePorts["ocr"]!
            let importPath = "/menagerie.zoo.v1.Zoo/ImportData"
            let alice = try await Self.newUser(stack, "alice"), bob = try await Self.newUser(stack, "bob")

            // Reading the zoo is public; replacing its data is the admin's.
            #expect(try await Self.call(zoo, "/menagerie.zoo.v1.Zoo/SearchAnimals", #"{"text":"lev"}"#).status == 200)
            let stranger = try await Self.call(zoo, importPath, "{}")
            #expect(stranger.status == 401 && stranger.body["code"] as? String == "unauthenticated", "\(stranger)")
            let user = try await Self.call(zoo, importPath, "{}", token: alice)
            #expect(user.status == 403 && user.body["code"] as? String == "permission_denied", "\(user)")
            let allowed = try await Self.call(zoo, importPath, "{}", token: admin)
            #expect(allowed.status != 401 && allowed.status != 403, "\(allowed)")
            // Through the gateway: a user's import is refused (PERMISSION_DENIED, exit 7); the operator's (the admin
            // token from compose's state) runs.
            let sample = Stack.root.appendingPathComponent("Services/Zoo/Core/SampleData").path
            let refused = try await Self.gateway(stack, as: alice, ["zoo", "import", "--dir", sample])
            #expect(refused.status == 7 && refused.output.contains("PERMISSION_DENIED"), "\(refused.output)")
            let imported = try await Self.operatorGateway(stack, ["zoo", "import", "--dir", sample])
            #expect(imported.status == 0, "\(imported.output)")

            // OCR templates are their user's: alice's is invisible to bob, and a stranger sees nothing at all.
            let made = try await Self.call(ocr, "/menagerie.ocr.v1.OCR/CreateTemplate", Self.template, token: alice)
            #expect(made.status == 200, "\(made)")
            let mine = try await Self.call(ocr, "/menagerie.ocr.v1.OCR/ListTemplates", "{}", token: alice)
            #expect((mine.body["templates"] as? [Any])?.count == 1, "\(mine)")
            let theirs = try await Self.call(ocr, "/menagerie.ocr.v1.OCR/ListTemplates", "{}", token: bob)
            #expect(theirs.status == 200 && (theirs.body["templates"] as? [Any] ?? []).isEmpty, "\(theirs)")
            let peek = try await Self.call(
                ocr, "/menagerie.ocr.v1.OCR/GetTemplate", #"{"template":"meter"}"#, token: bob)
            #expect(peek.status == 404, "\(peek)")
            let delete = try await Self.call(
                ocr, "/menagerie.ocr.v1.OCR/DeleteTemplate", #"{"template":"meter"}"#, token: bob)
            #expect(delete.status == 404, "\(delete)")
            // bob may use the same name for his own.
            #expect(
                try await Self.call(ocr, "/menagerie.ocr.v1.OCR/CreateTemplate", Self.template, token: bob).status
                    == 200)
            #expect(try await Self.call(ocr, "/menagerie.ocr.v1.OCR/ListTemplates", "{}").status == 401)
            let listed = try await Self.gateway(stack, as: bob, ["ocr", "template", "list", "--json"])
            #expect(listed.status == 0 && listed.output.contains("meter"), "\(listed.output)")

            // A revoked user is refused by the running replica within seconds.
            let revoke = try await Self.operatorGateway(stack, ["user", "revoke", "bob"])
            #expect(revoke.status == 0, "\(revoke.output)")
            let start = ContinuousClock.now
            var refusedAt: Duration?
            while ContinuousClock.now - start < TestTime.scaled(.seconds(5)) {
                if try await Self.call(ocr, "/menagerie.ocr.v1.OCR/ListTemplates", "{}", token: bob).status == 401 {
                    refusedAt = ContinuousClock.now - start
                    break
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(
                refusedAt.map { $0 < TestTime.scaled(.seconds(3)) } == true,
                "bob's token still worked \(ContinuousClock.now - start) after revocation")

            // An expired token is refused. It lives long enough (scaled) for one call before it expires.
            let life = Int64(TestTime.scale.rounded(.up))
            let brief = try await Self.operatorGateway(stack, ["token", "create", "alice", "--expires", "\(life)s"])
            #expect(brief.status == 0, "\(brief.output)")
            let short = try #require(brief.output.split(separator: "\n").last.map(String.init))
            #expect(try await Self.call(ocr, "/menagerie.ocr.v1.OCR/ListTemplates", "{}", token: short).status == 200)
            try await Task.sleep(for: .seconds(life) + .milliseconds(200))
            let expired = try await Self.call(ocr, "/menagerie.ocr.v1.OCR/ListTemplates", "{}", token: short)
            #expect(
                expired.status == 401 && (expired.body["message"] as? String)?.contains("expired") == true, "\(expired)"
            )

            let users = try await Self.operatorGateway(stack, ["user", "list"])
            #expect(users.output.contains("alice") && users.output.contains("revoked"), "\(users.output)")
            // Health's sign-up needs an admin by default (issue 38: anyone could make 26,000 users); the admin's works,
            // and its token works on OCR too: one identity.
            let anonymous = try await Self.call(
                stack.basePorts["health"]!, "/menagerie.health.v1.Health/CreateUser", #"{"name":"mallory"}"#)
            #expect(anonymous.status == 401, "\(anonymous)")
            let signup = try await Self.call(
                stack.basePorts["health"]!, "/menagerie.health.v1.Health/CreateUser", #"{"name":"cyril"}"#, token: admin
            )
            let cyril = try #require(signup.body["token"] as? String, "\(signup)")
            #expect(try await Self.call(ocr, "/menagerie.ocr.v1.OCR/ListTemplates", "{}", token: cyril).status == 200)

            // Guessing tokens: after a few failures the address backs off (429, RESOURCE_EXHAUSTED, with the seconds to
            // wait), and the replica logs one line for it in the window, not one per guess.
            var backedOff: (status: Int, body: [String: Any])?
            for index in 0..<12 {
                let guess = try await Self.call(
                    ocr, "/menagerie.ocr.v1.OCR/ListTemplates", "{}", token: "mnt_guess\(index)")
                if guess.status == 429 {
                    backedOff = guess
                    break
                }
                #expect(guess.status == 401, "\(guess)")
            }
            #expect(backedOff?.body["code"] as? String == "resource_exhausted", "\(String(describing: backedOff))")
            #expect(
                (backedOff?.body["message"] as? String)?.contains("retry in") == true,
                "\(String(describing: backedOff))")
            let log = try String(contentsOf: stack.state.appendingPathComponent("logs/ocr.0.log"), encoding: .utf8)
            let lines = log.split(separator: "\n").filter {
                $0.contains("failed authentication") && $0.contains("address 127.0.0.1")
            }
            #expect(lines.count == 1, "\(lines)")
            #expect(!log.contains("mnt_guess"), "a guessed token reached the log")
        }
    }

    @Test func aStrangerCannotImportOrActivateModels() async throws {
        try await Stack.with(services: ["classification"]) { stack in
            let up = try await Self.compose(stack, "up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let port = stack.basePorts["classification"]!
            let user = try await Self.newUser(stack, "dana")
            let activate = "/menagerie.classification.v1.Classification/SetActiveModel"
            #expect(try await Self.call(port, activate, #"{"name":"m"}"#).status == 401)
            #expect(try await Self.call(port, activate, #"{"name":"m"}"#, token: user).status == 403)
            #expect(
                try await Self.call(
                    port, "/menagerie.classification.v1.Classification/DeleteModel", #"{"name":"m"}"#, token: user
                ).status == 403)
            // What an app (and anonymous callers) get is the admin's to set (issue 41).
            let deploy = "/menagerie.classification.v1.Classification/SetDeployment"
            #expect(try await Self.call(port, deploy, #"{"app":"dogs","model":"m"}"#).status == 401)
            #expect(try await Self.call(port, deploy, #"{"app":"dogs","model":"m"}"#, token: user).status == 403)
            #expect(
                try await Self.call(port, "/menagerie.classification.v1.Classification/ListDeployments", "{}").status
                    == 200)
            #expect(
                try await Self.call(port, "/menagerie.classification.v1.Classification/ListModels", "{}").status == 200)
            // The operator's gateway is the admin: past the check, to the model that does not exist.
            let admin = try await Self.operatorGateway(stack, ["classify", "model", "activate", "m"])
            #expect(admin.output.contains("NOT_FOUND"), "\(admin.output)")
            let stranger = try await Self.gateway(stack, as: user, ["classify", "model", "activate", "m"])
            #expect(stranger.output.contains("PERMISSION_DENIED"), "\(stranger.output)")
        }
    }
}

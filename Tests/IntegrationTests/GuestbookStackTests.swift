import Foundation
import GatewayKit
import TestSupport
import Testing

/// The test-only guestbook, added by README's "Adding a service" steps, run as a stack's service is: `compose up`
/// from a services file that lists it (and nothing else), the gateway's `guestbook` group, plain HTTP/JSON
/// (Connect) with curl, the access levels guestbook.proto declares, its counting job, and replicas on one dqlite
/// cluster, and its deploy files rendered from its section. If this passes, those steps are all a new service needs.
@Suite(.serialized) struct GuestbookStackTests {
    /// A Connect call with curl: the HTTP status and the JSON body.
    static func call(_ port: Int, _ method: String, _ body: String, token: String? = nil) async throws -> (
        status: Int, body: [String: Any]
    ) {
        var arguments = ["-s", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "--data-binary", body]
        if let token { arguments += ["-H", "Authorization: Bearer \(token)"] }
        let run = try await Stack.run(
            "/usr/bin/curl", arguments + ["http://127.0.0.1:\(port)/menagerie.guestbook.v1.Guestbook/\(method)"],
            environment: [:])
        let lines = run.output.split(separator: "\n", omittingEmptySubsequences: false)
        let json = lines.dropLast().joined(separator: "\n")
        return (
            Int(lines.last ?? "") ?? 0,
            (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:]
        )
    }

    /// The JSON object the gateway printed under `--json` (pretty-printed: from the line that opens it on).
    static func json(_ output: String) throws -> [String: Any] {
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(lines.firstIndex { $0.hasPrefix("{") }, "no JSON object in: \(output)")
        let text = lines[start...].joined(separator: "\n")
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(output)")
    }

    @Test func composeRunsItTheGatewayAndHTTPDriveItAndItsRulesAndJobHold() async throws {
        try await Stack.with(services: ["guestbook"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "compose up failed: \(up.output)")
            let port = try #require(stack.basePorts["guestbook"])

            // The gateway knows it from the services file: in its help and in `status`.
            let help = try await stack.gateway(["--help"])
            #expect(help.output.contains("guestbook"), "\(help.output)")
            let status = try await stack.gateway(["status", "--json"])
            let instances = try statusInstances(status.output)
            #expect(
                instances.map { $0["service"] as? String } == ["guestbook"]
                    && instances.first?["health"] as? String == "SERVING", "\(instances)")

            // Its command group: add, list, show.
            let added = try await stack.gateway([
                "guestbook", "add", "4", "Slon se koupal.", "--author", "Eva", "--json",
            ])
            try #require(added.status == 0, "\(added.output)")
            // int64 is a JSON string
            let id = try #require((try Self.json(added.output))["id"] as? String, "\(added.output)")
            let listed = try await stack.gateway(["guestbook", "list", "4"])
            #expect(listed.status == 0 && listed.output.contains("#\(id) animal 4, Eva"), "\(listed.output)")

            // Plain HTTP/JSON on the same port, through the same server: what the gateway stored, and a write.
            let page = try await Self.call(port, "ListEntries", #"{"animalId":"4"}"#)
            #expect(
                page.status == 200
                    && (page.body["entries"] as? [[String: Any]])?.first?["text"] as? String == "Slon se koupal.",
                "\(page)")
            let posted = try await Self.call(port, "AddEntry", #"{"animalId":"4","text":"Chobot!"}"#)
            #expect(posted.status == 200 && posted.body["text"] as? String == "Chobot!", "\(posted)")
            let bad = try await Self.call(port, "AddEntry", #"{"animalId":"0","text":"x"}"#)
            #expect(bad.status == 400 && bad.body["code"] as? String == "invalid_argument", "\(bad)")

            // The declared levels: removing a note is the admin's. Without a token, refused on HTTP and by the
            // gateway (UNAUTHENTICATED, 16), and the note stays; with the stack's admin token, removed.
            let anonymous = try await Self.call(port, "DeleteEntry", #"{"id":"\#(id)"}"#)
            #expect(anonymous.status == 401 && anonymous.body["code"] as? String == "unauthenticated", "\(anonymous)")
            // (Given the endpoint and a state of no stack, the gateway has no admin token to send.)
            let noState = stack.directory.appendingPathComponent("no-state")
            try FileManager.default.createDirectory(at: noState, withIntermediateDirectories: true)
            let withoutToken = try await Stack.run(
                "\(Stack.binDirectory)/gateway",
                ["guestbook", "delete", id, "--endpoint", "guestbook=127.0.0.1:\(port)", "--state", noState.path],
                environment: stack.environment.merging(["MENAGERIE_ADMIN_TOKEN": "", "MENAGERIE_TOKEN": ""]) { $1 })
            #expect(withoutToken.status == 16, "\(withoutToken.output)")
            #expect(try await stack.gateway(["guestbook", "show", id]).status == 0)
            let deleted = try await stack.gateway(["guestbook", "delete", id])
            #expect(deleted.status == 0, "\(deleted.output)")
            #expect(try await stack.gateway(["guestbook", "show", id]).status == 5)

            // Its job: counted in the background, followed to its result; listed among the service's jobs.
            let counted = try await stack.gateway(["guestbook", "count", "4", "--json"])
            #expect(
                counted.status == 0 && (try? Self.json(counted.output))?["count"] as? String == "1", "\(counted.output)"
            )
            let jobs = try await stack.gateway(["guestbook", "jobs", "list"])
            #expect(jobs.status == 0 && jobs.output.contains("guestbook.count"), "\(jobs.output)")
            let anonymousJob = try await Self.call(port, "CountEntries", #"{"animalId":"4"}"#)
            #expect(anonymousJob.status == 401, "\(anonymousJob)")
        }
    }

    /// A stack whose services file does not list guestbook keeps it out of the gateway's help, and a call names
    /// the stack's services rather than reaching for one it does not run.
    @Test func theGatewayHidesTheGroupFromAStackWithoutIt() async throws {
        let stack = try Stack(services: ["zoo"])
        defer { try? FileManager.default.removeItem(at: stack.directory) }
        let help = try await stack.gateway(["--help"])
        #expect(help.status == 0 && !help.output.contains("guestbook"), "\(help.output)")
        let call = try await stack.gateway(["guestbook", "list", "4"])
        #expect(call.status == 5 && call.output.contains("the stack's services are zoo"), "\(call.output)")
    }

    /// Its deploy files come from its section alone, as a new service's do (`compose render`; none is committed, it is
    /// test-only): a Containerfile installing what its binary and the gateway link, and a kustomization of three
    /// clustered pods that Kubernetes' schemas accept (deploy/validate-manifests, which DeployTests check).
    @Test(.timeLimit(.minutes(5))) func itsContainerAndManifestsAreRenderedFromItsSection() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "guestbook-deploy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let config = scratch.appendingPathComponent("services.conf")
        try """
        [guestbook]
        port = 7500
        proto = menagerie.guestbook.v1
        cluster = yes
        container = guestbook.Containerfile
        kubernetes = guestbook.yaml
        packages = libdqlite0 libprotobuf-c1 libsqlite3-0 libssl3 libstdc++6 libuv1 zlib1g
        pods = 3
        resources = 250m 256Mi 1Gi
        volume = 1Gi

        """.write(to: config, atomically: true, encoding: .utf8)
        let environment = DeployTests.environment.merging(["MENAGERIE_COMPOSE_CONFIG": config.path]) { $1 }
        let compose = Stack.root.appendingPathComponent("compose/compose").path
        let out = scratch.appendingPathComponent("deploy")
        for kind in ["containers", "kubernetes"] {
            let rendered = try await Stack.run(compose, ["render", kind, "--out", out.path], environment: environment)
            try #require(rendered.status == 0, "\(rendered.output)")
        }
        let containerfile = try String(
            contentsOf: out.appendingPathComponent("guestbook.Containerfile"), encoding: .utf8)
        #expect(containerfile.contains("EXPOSE 7500\nENTRYPOINT [\"/opt/menagerie/guestbook\"]\n"), "\(containerfile)")
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/readelf"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/dpkg")
        {
            let needed = try await Stack.run(
                DeployTests.deploy.appendingPathComponent("runtime-packages").path,
                ["\(Stack.binDirectory)/guestbook", "\(Stack.binDirectory)/gateway"],
                environment: ProcessInfo.processInfo.environment)
            #expect(needed.status == 0, "\(needed.output)")
            let missing = Set(needed.output.split(separator: "\n").map(String.init)).subtracting(
                DeployTests.packages("PACKAGES", in: containerfile))
            #expect(missing.isEmpty, "guestbook.Containerfile does not install \(missing.sorted())")
        }
        let manifest = try String(contentsOf: out.appendingPathComponent("guestbook.yaml"), encoding: .utf8)
        #expect(
            manifest.contains("  replicas: 3\n")
                && manifest.contains(#"--cluster, "guestbook-0.guestbook-cluster:8500,"#), "\(manifest)")
        let validated = try await Stack.run(
            DeployTests.deploy.appendingPathComponent("validate-manifests").path, [out.path],
            environment: environment)
        #expect(
            validated.status == 0 && validated.output.contains("guestbook.yaml") && validated.output.contains("valid"),
            "\(validated.output)")
    }

    /// Through compose too, as `cluster = yes` in its section says: `compose up --nodes 2` starts a replica on each
    /// node, members of one dqlite cluster over mutual TLS, and a note written through node 1's is read through node 2's.
    @Test(
        .timeLimit(.minutes(5)),
        .enabled(if: Nodes.available, "needs root and ip netns (iproute2): compose up --nodes makes network namespaces")
    )
    func composeClustersItsReplicasOnNodes() async throws {
        let network = Nodes.freeNetwork()
        defer { Nodes.removeLeftovers(tag: network.tag) }  // after Stack.with's own down, should a failure get there
        try await Stack.with(services: ["guestbook"]) { stack in
            let port = try #require(stack.basePorts["guestbook"])
            try stack.writeConfig([
                ServiceSettings(name: "guestbook", port: port, data: "data/guestbook", cluster: true)
            ])
            let up = try await stack.compose(environment: network.environment, ["up", "--nodes", "2"])
            try #require(up.status == 0, "compose up --nodes 2 failed: \(up.output)")
            let addresses = (1...2).map { "\(network.subnet).\(10 + $0):\(port)" }
            /// The gateway's `guestbook` call through node `node`'s replica, again while a leader is elected (14).
            func call(_ node: Int, _ arguments: [String]) async throws -> (status: Int32, output: String) {
                let deadline = ContinuousClock.now + TestTime.scaled(.seconds(20))
                while true {
                    let result = try await stack.gateway(
                        ["guestbook"] + arguments + ["--endpoint", "guestbook=\(addresses[node - 1])"])
                    if result.status != 14 || ContinuousClock.now > deadline { return result }
                    try await Task.sleep(for: .milliseconds(300))
                }
            }
            let added = try await call(1, ["add", "9", "Lev řve.", "--json"])
            try #require(added.status == 0, "\(added.output)")
            let id = try #require((try Self.json(added.output))["id"] as? String, "\(added.output)")
            let seen = try await call(2, ["show", id])
            #expect(seen.status == 0 && seen.output.contains("Lev řve."), "\(seen.output)")
            let members = try await stack.compose(
                environment: network.environment, ["cluster", "members", "guestbook"])
            #expect(
                members.status == 0
                    && addresses.allSatisfy { address in
                        members.output.contains(address.replacingOccurrences(of: ":\(port)", with: ":\(port + 1000)"))
                    }, "\(members.output)")
            let down = try await stack.compose(environment: network.environment, ["down"])
            #expect(down.status == 0, "\(down.output)")
        }
    }

    /// Three replicas on one dqlite cluster (`--cluster`, as compose gives health's): a note written through one is
    /// read through another, and the count job runs on the cluster's database too.
    @Test func replicasShareOneDqliteCluster() async throws {
        let replicas = try ClusterReplicas("guestbook")
        for port in replicas.servicePorts { try await Stack.waitServing(port: port) }
        let added = try await replicas.gatewayRetrying(
            0, ["add", "7", "Tygr spí.", "--json"], within: TestTime.scaled(.seconds(20)))
        try #require(added.status == 0, "\(added.output)")
        let id = try #require((try Self.json(added.output))["id"] as? String, "\(added.output)")
        let seen = try await replicas.gatewayRetrying(2, ["show", id], within: TestTime.scaled(.seconds(20)))
        #expect(seen.status == 0 && seen.output.contains("Tygr spí."), "\(seen.output)")
        let counted = try await replicas.gatewayRetrying(1, ["count", "7"], within: TestTime.scaled(.seconds(20)))
        #expect(counted.status == 0 && counted.output.contains("animal 7: 1 note(s)"), "\(counted.output)")
    }
}

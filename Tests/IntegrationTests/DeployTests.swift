import Foundation
import TestSupport
import Testing

/// What deploy/ ships: a Containerfile per service whose packages hold every library its binaries link, a
/// build script that says so when no container engine runs, and Kubernetes manifests valid against Kubernetes'
/// own schemas, offline.
@Suite(.serialized) struct DeployTests {
    static let deploy = Stack.root.appendingPathComponent("deploy")
    /// The scripts read compose/services.conf through compose/compose, with the tests' build of menagerie-compose.
    static var environment: [String: String] {
        ProcessInfo.processInfo.environment.merging(["MENAGERIE_BIN_DIR": Stack.binDirectory]) { $1 }
    }

    /// The `ARG NAME="…"` list of a Containerfile.
    static func packages(_ name: String, in containerfile: String) -> [String] {
        let prefix = "ARG \(name)=\""
        guard
            let line = containerfile.split(separator: "\n").first(where: { $0.hasPrefix(prefix) && $0.hasSuffix("\"") })
        else { return [] }
        return line.dropFirst(prefix.count).dropLast().split(separator: " ").map(String.init)
    }

    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/readelf")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/dpkg"),
            "needs readelf (binutils) and dpkg to read what the binaries link"))
    func everyServiceHasAContainerfileInstallingWhatItsBinariesLink() async throws {
        for settings in Stack.shipped {
            // The Containerfile the manifest names for it.
            let service = settings.name
            let container = try #require(settings.container, "compose/services.conf names no container for \(service)")
            let file = Stack.root.appendingPathComponent("compose").appendingPathComponent(container)
                .standardizedFileURL
            let text = try #require(
                try? String(contentsOf: file, encoding: .utf8), "no Containerfile for \(service) at \(file.path)")
            #expect(text.contains("FROM docker.io/library/debian:12-slim"), "\(service): not on Debian 12")
            #expect(text.contains("ENTRYPOINT [\"/opt/menagerie/\(service)\"]"), "\(service): runs something else")
            let listed = Set(Self.packages("PACKAGES", in: text))
            let needed = try await Stack.run(
                Self.deploy.appendingPathComponent("runtime-packages").path,
                ["\(Stack.binDirectory)/\(service)", "\(Stack.binDirectory)/gateway"],
                environment: ProcessInfo.processInfo.environment)
            #expect(needed.status == 0, "\(service): \(needed.output)")
            let missing = Set(needed.output.split(separator: "\n").map(String.init)).subtracting(listed)
            #expect(
                missing.isEmpty,
                "\(service).Containerfile does not install \(missing.sorted()), which \(service) or gateway links")
            // libtorch is gigabytes: only the service that links it gets it.
            #expect(
                listed.contains { $0.hasPrefix("libtorch") } == (service == "classification"),
                "\(service): \(listed.sorted())")
        }
    }

    @Test func buildImagesSaysSoAndFailsWhenNoContainerEngineRuns() async throws {
        var environment = Self.environment
        environment["CONTAINER_ENGINE"] = "no-such-engine"
        let result = try await Stack.run(
            Self.deploy.appendingPathComponent("build-images").path, [], environment: environment)
        #expect(result.status == 1, "\(result.output)")
        #expect(
            result.output.contains("no container engine can build images on this machine, so no image was built"),
            "\(result.output)")
        #expect(result.output.contains("no-such-engine is not installed"), "\(result.output)")
        let unknown = try await Stack.run(
            Self.deploy.appendingPathComponent("build-images").path, ["nonsense"], environment: environment)
        #expect(unknown.status == 1 && unknown.output.contains("no Containerfile for 'nonsense'"), "\(unknown.output)")
    }

    /// deploy/validate-manifests: the shipped manifests pass; one with a misspelt field, or a file the
    /// kustomization does not list, does not. It installs kubernetes-validate (PyPI) into compose's cache once.
    @Test(.timeLimit(.minutes(5))) func kubernetesManifestsValidateOfflineAndTheKustomizationListsThemAll() async throws
    {
        let script = Self.deploy.appendingPathComponent("validate-manifests").path
        let shipped = try await Stack.run(script, [], environment: Self.environment)
        try #require(shipped.status == 0, "\(shipped.output)")
        #expect(shipped.output.contains("zoo.yaml") && shipped.output.contains("valid"), "\(shipped.output)")

        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "menagerie-manifests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        try FileManager.default.copyItem(at: Self.deploy.appendingPathComponent("kubernetes"), to: scratch)
        try? FileManager.default.removeItem(at: scratch.appendingPathComponent("secrets"))
        let zoo = scratch.appendingPathComponent("zoo.yaml")
        let original = try String(contentsOf: zoo, encoding: .utf8)
        try original.replacingOccurrences(of: "  replicas: 2", with: "  replicsa: 2").write(
            to: zoo, atomically: true, encoding: .utf8)
        let misspelt = try await Stack.run(script, [scratch.path], environment: Self.environment)
        #expect(misspelt.status != 0 && misspelt.output.contains("replicsa"), "\(misspelt.output)")

        try original.write(to: zoo, atomically: true, encoding: .utf8)
        try original.write(to: scratch.appendingPathComponent("stray.yaml"), atomically: true, encoding: .utf8)
        let unlisted = try await Stack.run(script, [scratch.path], environment: Self.environment)
        #expect(unlisted.status != 0 && unlisted.output.contains("stray.yaml"), "\(unlisted.output)")
    }

    /// The manifests' shape the issue asks for: StatefulSets with volumes for the stateful services, a Deployment for
    /// the zoo, headless Services, exec probes running `gateway probe`, a PodDisruptionBudget and resource requests
    /// for each, the CA, certificates and admin token as Secrets.
    @Test func manifestsGiveEachServiceItsKindProbesBudgetAndSecrets() throws {
        let directory = Self.deploy.appendingPathComponent("kubernetes")
        let kustomization = try String(
            contentsOf: directory.appendingPathComponent("kustomization.yaml"), encoding: .utf8)
        for settings in Stack.shipped {
            // The manifest the services file names for it, which the kustomization lists with its image.
            let service = settings.name
            let manifest = try #require(
                settings.kubernetes, "compose/services.conf names no kubernetes manifest for \(service)")
            let file = Stack.root.appendingPathComponent("compose").appendingPathComponent(manifest).standardizedFileURL
            #expect(
                file.deletingLastPathComponent().path == directory.standardizedFileURL.path,
                "\(service): \(manifest) is not in deploy/kubernetes")
            #expect(
                kustomization.contains("  - \(file.lastPathComponent)\n")
                    && kustomization.contains("  - name: menagerie/\(service)\n"),
                "kustomization.yaml lists no \(file.lastPathComponent) or image of \(service)")
            let text = try String(contentsOf: file, encoding: .utf8)
            let kind = service == "zoo" ? "Deployment" : "StatefulSet"
            #expect(text.contains("kind: \(kind)\n"), "\(service) is not a \(kind)")
            #expect(service == "zoo" || text.contains("volumeClaimTemplates:"), "\(service) has no volume of its own")
            #expect(
                text.contains("kind: Service\n") && text.contains("clusterIP: None"),
                "\(service) has no headless Service")
            #expect(text.contains("kind: PodDisruptionBudget"), "\(service) has no PodDisruptionBudget")
            for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
                #expect(
                    text.contains("\(probe):\n            exec:\n              command: [gateway, probe,"),
                    "\(service): \(probe)")
            }
            #expect(text.contains("requests:\n              cpu:"), "\(service) requests no resources")
            #expect(
                text.contains("secretName: menagerie-tls-\(service)") && text.contains("name: menagerie-admin-token"),
                "\(service): secrets")
            if ["health", "ocr"].contains(service) {
                // One dqlite cluster of three pods, which find each other before they are ready.
                #expect(
                    text.contains("  replicas: 3\n") && text.contains("--cluster, \"\(service)-0.\(service)-cluster:"),
                    "\(service): no cluster")
                #expect(
                    text.contains("name: \(service)-cluster\n") && text.contains("publishNotReadyAddresses: true"),
                    "\(service): no peers' Service")
            }
        }
        for secret in ["menagerie-admin-token"] + (Stack.services + ["gateway"]).map({ "menagerie-tls-\($0)" }) {
            #expect(kustomization.contains("- name: \(secret)\n"), "no Secret \(secret)")
        }
    }
}

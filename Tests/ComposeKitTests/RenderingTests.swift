import ComposeKit
import Foundation
import GatewayKit
import Testing

/// The deploy files rendered from the services file: what deploy/ commits is that rendering, and a service's section
/// is all its Containerfile and manifest come from.
@Suite struct RenderingTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let shipped = root.appendingPathComponent("compose/services.conf")

    static func manifest(_ text: String, at file: URL = URL(fileURLWithPath: "/srv/compose/services.conf")) throws
        -> Manifest
    {
        try Manifest.parse(text, file: file)
    }

    /// Like generated code, deploy/containers and deploy/kubernetes are compose/services.conf rendered: a section
    /// edited without rendering again fails here. Regenerate with `compose/compose render containers` and
    /// `compose/compose render kubernetes` (they write the files its `container` and `kubernetes` lines name).
    @Test(arguments: ["containers", "kubernetes"]) func theCommittedDeployFilesAreTheRendering(kind: String) throws {
        let manifest = try Manifest.parse(try String(contentsOf: Self.shipped, encoding: .utf8), file: Self.shipped)
        let files = try Rendering.files([kind], of: manifest)
        #expect(files.count == (kind == "containers" ? 4 : 6), "\(files.map(\.path))")
        for (path, text) in files {
            let committed = try? String(contentsOfFile: path, encoding: .utf8)
            #expect(
                committed == text,
                "\(path) is not what compose/services.conf renders: run compose/compose render \(kind) and commit it")
        }
    }

    @Test func aContainerfileInstallsItsPackagesCarriesItsModelsAndRunsItsArguments() throws {
        let manifest = try Self.manifest(
            """
            [ocr]
            port = 7200
            models = ppocr sevenseg
            packages = libuv1 tesseract-ocr-eng
            container = ocr.Containerfile
            arg = --refresh=0 2 * * 6
            arg = say "hi"
            """)
        let text = try Rendering.containerfile(try manifest.service("ocr"))
        #expect(text.contains("\nARG PACKAGES=\"libuv1 tesseract-ocr-eng\"\n"), "\(text)")
        #expect(text.contains("\nCOPY ppocr/ /opt/menagerie/ppocr/\nCOPY sevenseg/ /opt/menagerie/sevenseg/\n"))
        #expect(
            text.contains(
                "\nENV MENAGERIE_PPOCR=/opt/menagerie/ppocr\nENV MENAGERIE_SEVENSEG=/opt/menagerie/sevenseg\n"))
        #expect(text.contains("\nEXPOSE 7200\nENTRYPOINT [\"/opt/menagerie/ocr\"]\n"))
        #expect(
            text.hasSuffix(
                #"CMD ["--host", "0.0.0.0", "--port", "7200", "--data-dir", "/data", "--log-format", "json", "--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key", "--tls-ca", "/tls/ca.crt", "--refresh=0 2 * * 6", "say \"hi\""]"#
                    + "\n"), "\(text)")
        #expect(text.split(separator: "\n").allSatisfy { !$0.hasPrefix("#") || $0.count <= 118 })
    }

    @Test func aServiceWithoutPackagesOrResourcesIsNotRendered() throws {
        let manifest = try Self.manifest("[a]\nport = 1\ncontainer = a.Containerfile\nkubernetes = a.yaml\n")
        #expect(throws: ComposeFailure.self) { try Rendering.containerfile(try manifest.service("a")) }
        let error = #expect(throws: ComposeFailure.self) { try Rendering.kubernetes(try manifest.service("a")) }
        #expect(error?.message.contains("names no resources") == true, "\(String(describing: error))")
    }

    /// Pods, volume and cluster choose the kind: no volume a Deployment; a volume a StatefulSet, whose pods form one
    /// dqlite cluster (members, bind and listen addresses at port + 1000, their peers' Service) when it clusters.
    @Test func theManifestsShapeFollowsPodsVolumeAndCluster() throws {
        let manifest = try Self.manifest(
            """
            [web]
            port = 7100
            pods = 2
            resources = 250m 256Mi 1Gi
            [notes]
            port = 7500
            cluster = yes
            pods = 3
            volume = 1Gi
            resources = 1 1Gi 2Gi
            [single]
            port = 7600
            volume = 5Gi
            resources = 250m 256Mi 1Gi
            """)
        let web = try Rendering.kubernetes(try manifest.service("web"))
        #expect(web.contains("\nkind: Deployment\n") && web.contains("emptyDir: {}") && web.contains("minAvailable: 1"))
        #expect(!web.contains("volumeClaimTemplates") && !web.contains("--cluster"), "\(web)")
        let notes = try Rendering.kubernetes(try manifest.service("notes"))
        #expect(notes.contains("\nkind: StatefulSet\n") && notes.contains("  serviceName: notes-cluster\n"))
        #expect(
            notes.contains(
                #"--cluster, "notes-0.notes-cluster:8500,notes-1.notes-cluster:8500,notes-2.notes-cluster:8500","#),
            "\(notes)")
        #expect(notes.contains(#"--cluster-bind, "$(POD_NAME).notes-cluster:8500", --cluster-listen, "0.0.0.0:8500","#))
        #expect(notes.contains("  name: notes-cluster\n") && notes.contains("publishNotReadyAddresses: true"))
        #expect(notes.contains("            storage: 1Gi\n") && notes.contains("              cpu: \"1\"\n"))
        #expect(notes.contains("  maxUnavailable: 1\n"))
        let single = try Rendering.kubernetes(try manifest.service("single"))
        #expect(single.contains("\nkind: StatefulSet\n") && single.contains("  serviceName: single\n"))
        #expect(!single.contains("--cluster") && !single.contains("podManagementPolicy"), "\(single)")
    }

    @Test func whatTheRenderingCannotDeployIsRefused() throws {
        let cases = [
            ("[a]\nport = 1\ncluster = yes\npods = 3\nresources = 1 1Gi 1Gi", "no volume for its Raft log"),
            ("[a]\nport = 1\npods = 2\nvolume = 1Gi\nresources = 1 1Gi 1Gi", "each keep a database of their own"),
            (
                "[a]\nport = 1\ncluster = yes\nblobs = yes\npods = 3\nvolume = 1Gi\nresources = 1 1Gi 1Gi",
                "--blob-peers",
            ),
        ]
        for (text, message) in cases {
            let manifest = try Self.manifest(text)
            let error = #expect(throws: ComposeFailure.self, "\(text)") {
                try Rendering.kubernetes(try manifest.service("a"))
            }
            #expect(error?.message.contains(message) == true, "\(String(describing: error))")
        }
    }

    /// Into --out by the files' names; only the services named, yet the kustomization lists every deployed one.
    @Test func renderWritesTheNamedServicesAndAKustomizationOfAll() throws {
        let manifest = try Self.manifest(
            """
            [a]
            port = 7100
            resources = 250m 256Mi 1Gi
            kubernetes = ../deploy/a.yaml
            [b]
            port = 7200
            resources = 250m 256Mi 1Gi
            kubernetes = ../deploy/b.yaml
            [c]
            port = 7300
            """)
        let files = try Rendering.files(["kubernetes", "--out", "/tmp/out", "b"], of: manifest)
        #expect(files.map(\.path) == ["/tmp/out/b.yaml", "/tmp/out/kustomization.yaml", "/tmp/out/namespace.yaml"])
        let kustomization = files[1].text
        #expect(kustomization.contains("resources:\n  - namespace.yaml\n  - a.yaml\n  - b.yaml\nimages:\n"))
        #expect(
            kustomization.contains("  - name: menagerie-tls-b\n") && kustomization.contains("menagerie-tls-gateway"))
        #expect(!kustomization.contains("menagerie/c"))
        #expect(try Rendering.files(["kubernetes"], of: manifest).first?.path == "/srv/deploy/a.yaml")
        for (arguments, message) in [
            (["kubernetes", "c"], "[c] names no kubernetes file to render (kubernetes = …)"),
            (["kubernetes", "d"], "unknown service 'd' (known: a b c)"),
            (["pictures"], "usage: compose render containers|kubernetes [--out DIR] [SERVICE…]"),
            (["kubernetes", "--out"], "usage: compose render containers|kubernetes [--out DIR] [SERVICE…]"),
            (["containers", "--force"], "usage: compose render containers|kubernetes [--out DIR] [SERVICE…]"),
        ] {
            let error = #expect(throws: ComposeFailure.self) { try Rendering.files(arguments, of: manifest) }
            #expect(error?.message == message, "\(arguments)")
        }
    }
}

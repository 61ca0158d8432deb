import Foundation
import TestSupport
import Testing

/// The service authors' guide (docs/ServiceAuthors.docc, "Write a service") builds with the reference of the
/// modules it documents, and a broken symbol link in it fails the build rather than render as plain text.
@Suite(.serialized) struct DocsTests {
    static let script = Stack.root.appendingPathComponent("docs/build-docs").path
    static let docc: String? = {
        let candidates =
            ["/opt/swift/usr/bin/docc", "/usr/bin/docc"]
            + (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/docc" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()
    static let required = ProcessInfo.processInfo.environment["CI"] == "true"

    /// build-docs on the modules this test's build made (no nested `swift build`), writing into `directory`.
    static func buildDocs(into directory: URL, catalog: URL? = nil) async throws -> (status: Int32, output: String) {
        var environment = ProcessInfo.processInfo.environment
        environment["MENAGERIE_DOCS_SKIP_BUILD"] = "1"
        environment["MENAGERIE_BIN_DIR"] = Stack.binDirectory
        if let catalog { environment["MENAGERIE_DOCS_CATALOG"] = catalog.path }
        return try await Stack.run(
            Self.script, [directory.appendingPathComponent("Menagerie.doccarchive").path], environment: environment)
    }

    @Test func theGuideBuildsAndABrokenSymbolLinkFailsIt() async throws {
        guard Self.docc != nil else {
            #expect(!Self.required, "CI must have docc (it comes with the Swift toolchain)")
            print("DocsTests: skipped, docc is not installed")
            return
        }
        let directory = try Stack.scratchDirectory("menagerie-docs")
        defer { try? FileManager.default.removeItem(at: directory) }
        let built = try await Self.buildDocs(into: directory)
        #expect(built.status == 0, "\(built.output)")
        let data = directory.appendingPathComponent("Menagerie.doccarchive/data/documentation")
        for page in [
            "menagerie/writeaservice.json", "servicekit.json", "rpc.json", "storage.json", "guestbookapi.json",
        ] {
            #expect(
                FileManager.default.fileExists(atPath: data.appendingPathComponent(page).path),
                "no \(page) in the archive")
        }

        // The same catalogue with one symbol link broken: the build fails and names it.
        let catalog = directory.appendingPathComponent("Broken.docc")
        try FileManager.default.copyItem(at: Stack.root.appendingPathComponent("docs/ServiceAuthors.docc"), to: catalog)
        let article = catalog.appendingPathComponent("WriteAService.md")
        let text = try String(contentsOf: article, encoding: .utf8)
        #expect(text.contains("``ServiceKit/AppServices``"))
        try text.replacingOccurrences(of: "``ServiceKit/AppServices``", with: "``ServiceKit/AppServicez``")
            .write(to: article, atomically: true, encoding: .utf8)
        let broken = try await Self.buildDocs(into: directory, catalog: catalog)
        #expect(broken.status != 0 && broken.output.contains("AppServicez"), "\(broken.output)")
    }
}

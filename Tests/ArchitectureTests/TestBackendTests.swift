import Foundation
import Testing

/// compose's test command runs the storage suites again with MENAGERIE_STORAGE_BACKEND=dqlite; that pass covers a
/// store only if the test opened it on the configured backend. A store's `inMemory()` left on its default is SQLite on
/// both passes, silently: every test opens its stores with `using:` (`.testBackend`, from StorageTestSupport).
@Suite struct TestBackendTests {
    @Test func everyTestStoreNamesItsBackend() throws {
        let tests = DependencyTests.root.appendingPathComponent("Tests")
        let files = try #require(FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil))
        var checked = 0
        for case let file as URL in files where file.pathExtension == "swift" {
            // Test targets only (the test-only service's own modules, Tests/Services, define the constructors), and
            // not this one, which names the call it looks for.
            let target = file.pathComponents[tests.pathComponents.count]
            guard target.hasSuffix("Tests"), target != "ArchitectureTests" else { continue }
            let text = try String(contentsOf: file, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains("Store.inMemory(") {
                checked += 1
                #expect(
                    line.contains("using:"),
                    "\(file.lastPathComponent):\(number + 1) opens a store without choosing its backend")
            }
        }
        #expect(checked > 50, "found only \(checked) stores opened in the tests")
    }
}

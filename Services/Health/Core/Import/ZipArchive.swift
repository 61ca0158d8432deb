import Foundation
import Zip

extension ZipArchive {
    /// The Health export's `export.xml`: `apple_health_export/export.xml` as the Health app writes it, or one at any
    /// depth (a re-zipped folder), the shallowest first. macOS's `__MACOSX/` resource forks are not it.
    func exportXML() throws -> ZipEntry {
        let candidates = entries.filter {
            ($0.name == "export.xml" || $0.name.hasSuffix("/export.xml")) && !$0.name.hasPrefix("__MACOSX/")
        }
        guard
            let entry = candidates.min(by: { $0.name.split(separator: "/").count < $1.name.split(separator: "/").count }
            )
        else {
            let names = entries.prefix(5).map(\.name).joined(separator: ", ")
            throw HealthError.invalid(
                "\(path): no export.xml in this zip (it has \(entries.count) entries\(names.isEmpty ? "" : ": \(names)")); "
                    + "expected the Health app's export.zip with apple_health_export/export.xml")
        }
        return entry
    }
}

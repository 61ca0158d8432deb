import Foundation

/// The folders a service's proto may belong to (see `ModuleLayout`): each folder directly under `Services` and
/// `Tests/Services` (the test-only services'), as Package.swift's `service(...)` roots them.
public enum ServiceFolders {
    /// The roots a service folder lives under, relative to the package.
    public static let roots = ["Services", "Tests/Services"]

    /// The package-relative service folders under `packageRoot`, sorted (`Services/Zoo`, `Tests/Services/Guestbook`).
    public static func find(packageRoot: URL) throws -> [String] {
        var folders: [String] = []
        for root in roots {
            let url = packageRoot.appendingPathComponent(root)
            guard FileManager.default.fileExists(atPath: url.path) else { continue }
            for name in try FileManager.default.contentsOfDirectory(atPath: url.path) where !name.hasPrefix(".") {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: url.appendingPathComponent(name).path, isDirectory: &isDirectory),
                    isDirectory.boolValue
                {
                    folders.append(root + "/" + name)
                }
            }
        }
        return folders.sorted()
    }

    /// modules.conf and the service folders of the package at `packageRoot`: where every proto file's code goes.
    public static func layout(packageRoot: URL) throws -> ModuleLayout {
        let conf = packageRoot.appendingPathComponent("Proto/modules.conf")
        let parsed = try ModuleLayout(parsing: String(decoding: try Data(contentsOf: conf), as: UTF8.self))
        return ModuleLayout(entries: parsed.entries, serviceFolders: try find(packageRoot: packageRoot))
    }
}

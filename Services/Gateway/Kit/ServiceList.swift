import Base
import Foundation

/// The services of the stack, in the order of compose's services file: `MENAGERIE_COMPOSE_CONFIG`, else
/// `compose/services.conf` above the executable or the working directory. That file is the one list of
/// services; the gateway and the tests read it rather than keeping their own.
public enum ServiceList {
    /// The services file's path, or nil when none is found.
    public static func file(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        if let explicit = environment["MENAGERIE_COMPOSE_CONFIG"], !explicit.isEmpty { return URL(fileURLWithPath: explicit) }
        return UpwardSearch.find("compose/services.conf")
    }

    /// The services named in the services file, in its order; empty when there is no file.
    public static func names(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        guard let file = file(environment: environment), let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return parse(text)
    }

    /// The first word of each line that is neither blank nor a `#` comment, once each.
    public static func parse(_ text: String) -> [String] {
        var names: [String] = []
        for line in text.split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#"),
                let name = trimmed.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.map(String.init),
                !names.contains(name)
            else { continue }
            names.append(name)
        }
        return names
    }
}

/// Which module each `.proto` file's generated code belongs to: a service's proto by convention, the others (shared
/// and test-fixture protos) by their line in `Proto/modules.conf`.
///
/// A service's proto package `menagerie.<name>.v<N>` belongs to the service folder named `<name>` in any case
/// (`Services/OCR` for `menagerie.ocr.v1`, the test-only `Tests/Services/Guestbook` for `menagerie.guestbook.v1`):
/// its Swift goes to `<Name>API` in `<folder>/API/Generated`, its C to `<Name>ProtoC` in `<folder>/ProtoC`, as
/// Package.swift's `service(...)` declares them, and the gateway gets its `<Name>CLI`'s `<Name>Commands`. The folder
/// is the declaration: a new service needs no line here.
///
/// One API module per proto package (as grpc-swift-2 generates per service), so an edit to `ocr.proto` rebuilds
/// the OCR service and the gateway, nothing else, and a service links only the domains it speaks. Each file's
/// Swift (messages, method descriptors, service protocols, clients) goes to its Swift module; protoc-c's C and the
/// module's descriptor registry go to a C target of their own, since a SwiftPM target holds one language.
public struct ModuleLayout: Sendable, Equatable {
    /// Where one proto file's code goes.
    public struct Entry: Sendable, Equatable {
        /// The proto file as protoc names it, e.g. `menagerie/zoo/v1/zoo.proto`.
        public let protoFile: String
        /// The Swift module of its messages and method descriptors, e.g. `ZooAPI`.
        public let swiftModule: String
        /// Package-relative directory of its `.pb.swift` (and, unless `serviceModule` says otherwise, `.rpc.swift`).
        public let swiftDirectory: String
        /// The C target of protoc-c's code and the registry, e.g. `ZooProtoC`.
        public let cModule: String
        /// Package-relative directory of that C target: `.c` files below it, headers below its `include/`.
        public let cDirectory: String
        /// The module of the service protocols and clients when not `swiftModule` (rpc.proto's built-in services
        /// live in `RPC`, which needs its messages below it).
        public let serviceModule: String
        public let serviceDirectory: String
        /// The service (`Zoo`) whose folder placed the file by convention; nil for a line of modules.conf.
        public let service: String?

        public init(
            protoFile: String, swiftModule: String, swiftDirectory: String, cModule: String, cDirectory: String,
            serviceModule: String? = nil, serviceDirectory: String? = nil, service: String? = nil
        ) {
            self.protoFile = protoFile
            self.swiftModule = swiftModule
            self.swiftDirectory = swiftDirectory
            self.cModule = cModule
            self.cDirectory = cDirectory
            self.serviceModule = serviceModule ?? swiftModule
            self.serviceDirectory = serviceDirectory ?? swiftDirectory
            self.service = service
        }

        /// The convention's entry for a service's proto file: `<Name>API` in `<folder>/API/Generated`, `<Name>ProtoC`
        /// in `<folder>/ProtoC`, where `folder` is `<root>/<Name>`.
        public init(protoFile: String, serviceFolder folder: String) {
            let name = String(folder.split(separator: "/").last ?? Substring(folder))
            self.init(
                protoFile: protoFile, swiftModule: name + "API", swiftDirectory: folder + "/API/Generated",
                cModule: name + "ProtoC", cDirectory: folder + "/ProtoC", service: name)
        }

        /// This entry as a line of modules.conf (which generate.sh reads back from schema-gen's resolved layout).
        public var line: String {
            var fields = [protoFile, swiftModule, swiftDirectory, cModule, cDirectory]
            if serviceModule != swiftModule || serviceDirectory != swiftDirectory { fields += [serviceModule, serviceDirectory] }
            return fields.joined(separator: " ")
        }

        /// Where protoc-c's output for this file goes: `.h` under `include/`, `.c` beside it.
        public func cPath(ofProtocCOutput relativePath: String) -> String {
            relativePath.hasSuffix(".h") ? "\(cDirectory)/include/\(relativePath)" : "\(cDirectory)/\(relativePath)"
        }

        /// The C target's registry lookup function (`ZooProtoC_message_descriptor`), unique across C targets.
        var registryFunction: String { "\(cModule)_message_descriptor" }

        /// The C target's registry header, named after the target so no two targets' headers shadow each other.
        var registryHeader: String { "\(cModule)_registry.h" }
    }

    public let entries: [Entry]
    /// The package-relative service folders (`Services/Zoo`, `Tests/Services/Guestbook`) a proto package not in
    /// `entries` may belong to (see `ServiceFolders`).
    public let serviceFolders: [String]

    public init(entries: [Entry], serviceFolders: [String] = []) {
        self.entries = entries
        self.serviceFolders = serviceFolders
    }

    /// The entry for a proto file: its line in `modules.conf`; `GeneratorError.unsupported` when there is none.
    public func entry(for protoFile: String) throws -> Entry {
        guard let entry = entries.first(where: { $0.protoFile == protoFile }) else {
            throw GeneratorError.unsupported("\(protoFile) has no line in Proto/modules.conf (which module does it belong to?)")
        }
        return entry
    }

    /// The entry for a proto file of `package`: its line in `modules.conf`, else the convention's for the one service
    /// folder named as the package's second word (`menagerie.ocr.v1` → `Services/OCR`); `GeneratorError.unsupported`
    /// when neither places it, or when two folders could.
    public func entry(for protoFile: String, package: String) throws -> Entry {
        if let entry = entries.first(where: { $0.protoFile == protoFile }) { return entry }
        let words = package.split(separator: ".")
        let name = words.count == 3 && words[0] == "menagerie" ? words[1].lowercased() : nil
        let folders = serviceFolders.filter { folder in
            folder.split(separator: "/").last.map { $0.lowercased() } == name
        }
        guard name != nil, folders.count == 1 else {
            let why =
                folders.isEmpty
                ? "is neither a service's (package menagerie.NAME.vN with a folder Services/NAME or Tests/Services/NAME, "
                    + "NAME in any case) nor placed by a line in Proto/modules.conf"
                : "could belong to \(folders.joined(separator: " or ")): rename one, or place it in Proto/modules.conf"
            throw GeneratorError.unsupported("\(protoFile) (package \(package)) \(why)")
        }
        return Entry(protoFile: protoFile, serviceFolder: folders[0])
    }

    /// The services placed by convention, in the order of their entries (`Zoo`, from `Services/Zoo`).
    public var services: [String] { entries.compactMap(\.service) }

    /// The layout as modules.conf lines: every entry, those the convention placed included.
    public var lines: String { entries.map { $0.line + "\n" }.joined() }

    /// Every directory the generator writes into, for the staleness check and for clearing old output.
    public var outputDirectories: [String] {
        var seen: [String] = GeneratedLists.directories
        for entry in entries {
            for directory in [entry.swiftDirectory, entry.serviceDirectory, entry.cDirectory] where !seen.contains(directory) {
                seen.append(directory)
            }
        }
        return seen
    }

    /// Parses `modules.conf`: one line per proto file, fields separated by white space,
    /// `PROTO SWIFT_MODULE SWIFT_DIR C_MODULE C_DIR [SERVICE_MODULE SERVICE_DIR]`; `#` starts a comment.
    public init(parsing text: String) throws {
        var entries: [Entry] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            if fields.isEmpty { continue }
            guard fields.count == 5 || fields.count == 7 else {
                throw GeneratorError.malformedDescriptor("modules.conf line \(index + 1): expected 5 or 7 fields, got \(fields.count)")
            }
            guard !entries.contains(where: { $0.protoFile == fields[0] }) else {
                throw GeneratorError.nameClash("modules.conf line \(index + 1): \(fields[0]) is listed twice")
            }
            entries.append(Entry(
                protoFile: fields[0], swiftModule: fields[1], swiftDirectory: fields[2], cModule: fields[3], cDirectory: fields[4],
                serviceModule: fields.count == 7 ? fields[5] : nil, serviceDirectory: fields.count == 7 ? fields[6] : nil))
        }
        self.init(entries: entries)
    }
}

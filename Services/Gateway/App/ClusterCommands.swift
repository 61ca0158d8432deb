import ArgumentParser
import Base
import Dqlite
import Foundation
import GatewayKit
import RPC
import Schema
import Storage

// The operator's commands for a service's replicated database: they speak dqlite's protocol to the cluster's
// nodes (the addresses the replicas got as --cluster), not the services' RPC, so they work while no replica
// serves and need no token: the operator's certificate of the clusters' CA (compose's state) is the credential.

/// `gateway cluster …`
struct ClusterCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster",
        abstract:
            "Operate a service's dqlite cluster: import a single machine's database, back it up, restore it, list, add and remove members.",
        discussion: """
            SERVICE names the cluster's database (each service's replicas keep theirs under its name); --cluster lists \
            the nodes' addresses (host:port, comma-separated), as the replicas' --cluster does (default: \
            $MENAGERIE_CLUSTER). compose/compose cluster and node add|remove run these with the stack's addresses. \
            A cluster that answers with no leader within --timeout is UNAVAILABLE (14); a destination that holds \
            data, or whose schema versions differ from the source's, FAILED_PRECONDITION (9).
            """,
        subcommands: [Import.self, Backup.self, Restore.self, Members.self, Add.self, Remove.self])

    /// `gateway cluster import SERVICE FILE`
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy a single machine's SQLite database (the service's file) into the service's cluster.",
            discussion: """
                Schema and rows, table by table, each table's count checked; the migrations' versions come along, so \
                the service does not migrate again. Refused when the cluster's database holds rows (--replace \
                overwrites them) or its replicas run another schema version. Copy while clients are idle: a write \
                that lands during the copy may be overwritten.
                """)
        @OptionGroup var cluster: ClusterOptions
        @Argument(help: "The SQLite file (e.g. .data/health/health.sqlite).", completion: .file()) var file: String
        @Flag(help: "Overwrite the rows the cluster's database holds.") var replace = false

        func run() async throws {
            try InputFile.check(file)  // before any connection; exits 66
            try await cluster.copy(.intoCluster, file: file, replacing: replace, verb: "imported")
        }
    }

    /// `gateway cluster backup SERVICE FILE`
    struct Backup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the service's cluster database to an SQLite file: one consistent snapshot.",
            discussion: """
                The file is an ordinary database of the service (`SERVICE --database FILE` runs on it) and what \
                `gateway cluster restore` takes. It is written beside FILE and moved into place when complete; an \
                existing FILE is refused unless --replace.
                """)
        @OptionGroup var cluster: ClusterOptions
        @Argument(help: "The file to write.", completion: .file()) var file: String
        @Flag(help: "Overwrite FILE if it exists.") var replace = false

        func run() async throws {
            // Before any connection; exits 73.
            let directory = URL(fileURLWithPath: file).deletingLastPathComponent().path
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue
            else {
                throw FileError(.notWritable, path: file, reason: "no such directory: \(directory)")
            }
            guard FileManager.default.isWritableFile(atPath: directory) else {
                throw FileError(.notWritable, path: file, reason: "cannot write in \(directory)")
            }
            try await cluster.copy(.outOfCluster, file: file, replacing: replace, verb: "backed up")
        }
    }

    /// `gateway cluster restore SERVICE FILE`
    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Put a backup (an SQLite file of the service) back into the service's cluster.",
            discussion: """
                As import, for a cluster that holds data: --replace is needed to overwrite its rows, which is what a \
                restore does. The schema versions must match the replicas' (restore into the version that wrote it).
                """)
        @OptionGroup var cluster: ClusterOptions
        @Argument(help: "The backup file.", completion: .file()) var file: String
        @Flag(help: "Overwrite the rows the cluster's database holds.") var replace = false

        func run() async throws {
            try InputFile.check(file)
            try await cluster.copy(.intoCluster, file: file, replacing: replace, verb: "restored")
        }
    }

    /// `gateway cluster members SERVICE`
    struct Members: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the cluster's members as its leader knows them: id, address, role, and which one leads.",
            discussion: """
                --json prints {"leader": ID, "members": [{"id", "address", "role"}]} (role voter, standby or spare).
                """)
        @OptionGroup var cluster: ClusterOptions

        func run() async throws {
            try await cluster.run { client in
                let members = try client.members().sorted { $0.id < $1.id }
                let leader = try client.leader()
                if cluster.json {
                    printJSON(
                        .object([
                            JSONMember("leader", leader.map { .number($0.id) } ?? .null),
                            JSONMember(
                                "members",
                                .array(
                                    members.map { member in
                                        .object([
                                            JSONMember("id", .number(member.id)),
                                            JSONMember("address", .string(member.address)),
                                            JSONMember("role", .string(member.role.roleName)),
                                        ])
                                    })),
                        ]))
                } else {
                    printTable(
                        ["ID", "ADDRESS", "ROLE", "LEADER"],
                        members.map { ["\($0.id)", $0.address, $0.role.roleName, $0.id == leader?.id ? "*" : ""] })
                }
            }
        }
    }

    /// `gateway cluster add SERVICE ID ADDRESS`
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make the running node ID at ADDRESS a voting member of the cluster.",
            discussion: """
                The node must be running (the leader sends it the log before it votes). A replica started with \
                --cluster joins by itself; this is for a node that did not. Nothing changes when it is a voter already.
                """)
        @OptionGroup var cluster: ClusterOptions
        @Argument(help: "The node's id (a positive number, unique in the cluster).") var id: UInt64
        @Argument(help: "The node's address (host:port).") var address: String

        func validate() throws {
            guard id > 0 else { throw InvalidValue("a node id must be a positive number (got 0)") }
            try ClusterOptions.checkAddress(address)
        }

        func run() async throws {
            try await cluster.run { client in
                try client.join(id: id, address: address)
                print("node \(id) at \(address) is a voter of \(cluster.service)'s cluster")
            }
        }
    }

    /// `gateway cluster remove SERVICE MEMBER`
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Take a member (by id or address) out of the cluster, before its machine goes for good.",
            discussion: """
                Leadership moves away first when it leads. The others stop counting it towards a quorum, so stop its \
                process afterwards: started again, a replica would join again. The last voter is never removed. \
                Nothing changes when it is no member.
                """)
        @OptionGroup var cluster: ClusterOptions
        @Argument(help: "The member's id or address (host:port).") var member: String

        func validate() throws {
            if UInt64(member) == nil { try ClusterOptions.checkAddress(member) }
        }

        func run() async throws {
            try await cluster.run { client in
                let members = try client.members()
                guard let found = members.first(where: { UInt64(member) == $0.id || member == $0.address }) else {
                    print("\(member) is no member of \(cluster.service)'s cluster: nothing to do")
                    return
                }
                try client.remove(id: found.id)
                print("node \(found.id) at \(found.address) removed from \(cluster.service)'s cluster")
            }
        }
    }
}

enum CopyDirection { case intoCluster, outOfCluster }

/// What every `gateway cluster` command takes: which service's cluster, its nodes, and how long to wait.
struct ClusterOptions: ParsableArguments {
    @Argument(help: "The service whose cluster it is, e.g. health.") var service: String

    @Option(
        name: .customLong("cluster"),
        help: ArgumentHelp("The cluster's nodes (default: $MENAGERIE_CLUSTER).", valueName: "host:port,…"))
    var addresses: String?

    @Option(parsing: .unconditional, help: "Seconds to wait for the cluster's leader.") var timeout = 10.0

    @Flag(help: "Print JSON instead of text.") var json = false

    /// A stack made with TLS (`compose up --tls`) runs its clusters over mutual TLS: the gateway's certificate, found
    /// as for every other command, is presented to the nodes.
    @OptionGroup var tls: ClientTLSOptions

    func validate() throws {
        try validateTimeout(timeout)
        guard service.range(of: "^[a-z][a-z0-9_-]{0,63}$", options: .regularExpression) != nil else {
            throw InvalidValue(
                "SERVICE must be a service's name: lowercase letters, digits, - or _ (got \"\(service)\")")
        }
        for address in try nodeAddresses() { try Self.checkAddress(address) }
    }

    /// `--cluster`, else `$MENAGERIE_CLUSTER`, split at commas.
    func nodeAddresses() throws -> [String] {
        guard let list = addresses ?? ProcessInfo.processInfo.environment["MENAGERIE_CLUSTER"], !list.isEmpty else {
            throw InvalidValue("which cluster? --cluster host:port,… (or $MENAGERIE_CLUSTER) names its nodes")
        }
        return list.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
    }

    /// `host:port` with a host and a port 1-65535.
    static func checkAddress(_ address: String) throws {
        guard let colon = address.lastIndex(of: ":"), colon != address.startIndex,
            let port = Int(address[address.index(after: colon)...]), (1...65535).contains(port),
            !address[..<colon].contains(where: { $0.isWhitespace || $0 == "/" })
        else { throw InvalidValue("a node's address must be host:port with a port 1-65535 (got \"\(address)\")") }
    }

    func client() throws -> DqliteClient {
        let wait = Duration.milliseconds(Int64(timeout * 1000))
        // A node that is down or cut off costs the leader search a second, not a statement's five.
        return try DqliteClient(
            addresses: try nodeAddresses(), database: service, callTimeout: min(wait, .seconds(5)),
            discoveryTimeout: min(wait, .seconds(1)), leaderWait: wait, tls: try clusterTLS())
    }

    /// The cluster's TLS: `--tls-ca`/`--tls-cert`/`--tls-key` when given; else the operator's certificate of the
    /// clusters' CA (`$MENAGERIE_CLUSTER_TLS_DIR`, else `cluster/tls` in compose's state: `menagerie-operator.pem`),
    /// which members naming their role require; else the gateway's TLS credentials as for every other command (a
    /// client certificate is then required: nodes take no client without one); else nil for plaintext.
    func clusterTLS(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ClusterTLS? {
        if tls.caFile == nil, let directory = try Self.operatorDirectory(environment: environment) {
            let certificate = directory.appendingPathComponent("menagerie-operator.pem").path
            let key = directory.appendingPathComponent("menagerie-operator.key").path
            for (file, role) in [(certificate, "the operator's certificate"), (key, "the operator's key")]
            where !FileManager.default.isReadableFile(atPath: file) {
                throw FileError(
                    FileManager.default.fileExists(atPath: file) ? .unreadable : .missing, path: file,
                    reason: "the clusters' members admit only the operator's certificate for these commands", role: role
                )
            }
            return try ClusterTLS(
                certificateFile: certificate, keyFile: key, caFile: directory.appendingPathComponent("ca.pem").path)
        }
        guard let credentials = try tls.credentials(stateDirectory: nil) else { return nil }
        guard let certificate = credentials.certificateFile, let key = credentials.keyFile else {
            throw InvalidValue(
                "a cluster over TLS takes only clients with a certificate of its CA: give --tls-cert and --tls-key")
        }
        return try ClusterTLS(certificateFile: certificate, keyFile: key, caFile: credentials.caFile)
    }

    /// Where the clusters' CA and the operator's certificate are, found as compose's state is; a named directory
    /// without the CA is an error, never plaintext.
    static func operatorDirectory(environment: [String: String]) throws -> URL? {
        if let variable = environment["MENAGERIE_CLUSTER_TLS_DIR"], !variable.isEmpty {
            let directory = URL(fileURLWithPath: variable)
            let ca = directory.appendingPathComponent("ca.pem").path
            guard FileManager.default.isReadableFile(atPath: ca) else {
                throw FileError(
                    FileManager.default.fileExists(atPath: ca) ? .unreadable : .missing, path: ca,
                    reason: "MENAGERIE_CLUSTER_TLS_DIR names a directory without the clusters' CA (ca.pem)",
                    role: "the clusters' CA")
            }
            return directory
        }
        if let state = environment["MENAGERIE_STATE_DIR"], !state.isEmpty {
            let directory = URL(fileURLWithPath: state).appendingPathComponent("cluster/tls")
            return FileManager.default.fileExists(atPath: directory.appendingPathComponent("ca.pem").path)
                ? directory : nil
        }
        return UpwardSearch.find(
            "compose/.state/cluster/tls/ca.pem",
            from: [UpwardSearch.workingDirectory, UpwardSearch.executableDirectory])?
            .deletingLastPathComponent()
    }

    /// Runs `body` with a client of the cluster; its errors print their status and exit with its code.
    func run(_ body: (DqliteClient) throws -> Void) async throws {
        try await reportingFailures(json: json) {
            do {
                try body(try client())
            } catch let error as DqliteError where error.kind == .misuse {
                // e.g. the last voter, an id taken by another address
                throw RPCError(.failedPrecondition, error.message)
            } catch let error as CategorizedError {
                throw RPCError(StatusCode(error.category), error.message)
            }
        }
    }

    /// A copy with a line per table and a summary (or, under --json, {"schemaVersion", "rows", "seconds", "tables"}).
    func copy(_ direction: CopyDirection, file: String, replacing: Bool, verb: String) async throws {
        try await run { client in
            let (source, destination): (DatabaseLocation, DatabaseLocation) =
                direction == .intoCluster ? (.file(file), .cluster(client)) : (.cluster(client), .file(file))
            let started = ContinuousClock.now
            let report = try DatabaseCopy.copy(from: source, to: destination, replacing: replacing) { table in
                if !json { print("  \(table.table): \(table.rows) rows") }
            }
            let seconds = Double((ContinuousClock.now - started) / .milliseconds(1)) / 1000
            if json {
                printJSON(
                    .object([
                        JSONMember("schemaVersion", .number(report.schemaVersion)),
                        JSONMember("rows", .number(report.rows)),
                        JSONMember("seconds", .number(JSONNumber(literal: String(format: "%.3f", seconds))!)),
                        JSONMember(
                            "tables",
                            .array(
                                report.tables.map {
                                    .object([
                                        JSONMember("table", .string($0.table)), JSONMember("rows", .number($0.rows)),
                                    ])
                                })),
                    ]))
            } else {
                print(
                    "\(verb) \(report.rows) rows in \(report.tables.count) tables (schema version \(report.schemaVersion)) "
                        + "from \(source) to \(destination) in \(String(format: "%.1f", seconds)) s")
            }
        }
    }
}

extension Optional where Wrapped == DqliteMember.Role {
    var roleName: String {
        switch self {
        case .voter: "voter"
        case .standBy: "standby"
        case .spare: "spare"
        case nil: "unknown"
        }
    }
}

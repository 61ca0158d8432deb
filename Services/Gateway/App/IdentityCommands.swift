import ArgumentParser
import Base
import Foundation
import GatewayKit
import Identity
import RPC
import Schema

/// Where the stack's identity store is, for the commands that manage users and tokens: they are the operator's,
/// run beside the stack, and write the file every replica reads (a revocation reaches them all within about a
/// second), so they need no running service and no token — access to compose's state is the admin's credential.
struct IdentityOptions: ParsableArguments {
    @Option(
        name: .customLong("identity"),
        help: ArgumentHelp(
            "The identity store (default: $MENAGERIE_IDENTITY, else identity.sqlite in --state).", valueName: "file"),
        completion: .file())
    var identity: String?

    @Option(
        name: .customLong("state"),
        help: "The compose state directory (default: $MENAGERIE_STATE_DIR, else compose/.state).",
        completion: .directory)
    var stateDirectory: String?

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func validate() throws {
        guard let identity else { return }
        var isDirectory: ObjCBool = false
        if identity.isEmpty || identity.utf8.contains(0)
            || FileManager.default.fileExists(atPath: identity, isDirectory: &isDirectory) && isDirectory.boolValue
        {
            throw InvalidValue("--identity must be a file path (got \"\(identity)\")")
        }
    }

    /// The store, which must exist already (`compose up` makes it): a typo never creates an empty second one.
    func open() throws -> IdentityStore {
        let environment = ProcessInfo.processInfo.environment
        let path: String
        if let identity {
            path = identity
        } else if let variable = environment["MENAGERIE_IDENTITY"], !variable.isEmpty {
            path = variable
        } else if let state = stateDirectory ?? environment["MENAGERIE_STATE_DIR"] {
            path = URL(fileURLWithPath: state).appendingPathComponent("identity.sqlite").path
        } else if let found = UpwardSearch.find(
            "compose/.state/identity.sqlite", from: [UpwardSearch.workingDirectory, UpwardSearch.executableDirectory])
        {
            path = found.path
        } else {
            throw RPCError(
                .notFound, "no identity store found: start the stack with compose/compose up, or pass --identity FILE")
        }
        guard FileManager.default.fileExists(atPath: path) else {
            throw RPCError(
                .notFound,
                "no identity store at \(path): start the stack with compose/compose up, or pass --identity FILE")
        }
        do {
            return try IdentityStore(path: path)
        } catch {
            throw RPCError(.unavailable, "cannot open the identity store \(path): \(error)")
        }
    }

    /// Runs `body` with the store; identity and storage errors print their status and exit with its code.
    func run(_ body: (IdentityStore) throws -> Void) async throws {
        try await reportingFailures(json: json) {
            do {
                try body(try open())
            } catch let error as CategorizedError {
                throw RPCError(StatusCode(error.category), error.message)
            }
        }
    }
}

/// A user name from the command line, checked before anything is opened.
func checkedUserName(_ name: String) throws {
    do { try IdentityStore.validate(name: name) } catch { throw InvalidValue(error.message) }
}

/// `--expires 30d`: seconds from now, in s, m, h or d.
struct ExpiryDuration: ExpressibleByArgument {
    let seconds: Int64

    init?(argument: String) {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        guard let unit = argument.last.flatMap({ units[$0] }), let count = Int64(argument.dropLast()), count > 0,
            count <= 36_500 * 86400 / unit
        else { return nil }
        seconds = count * unit
    }
}

struct UserCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Manage the stack's users (the operator's, beside the stack).",
        discussion: """
            Users and their tokens live in compose's state (identity.sqlite), which every service reads: reading the zoo \
            needs no token; OCR templates and records, health samples and classification datasets are their user's; \
            imports, models and the catalogue need an admin. The gateway sends $MENAGERIE_TOKEN, else the stack's admin \
            token (compose's state), as `authorization: Bearer …`.
            """,
        subcommands: [UserCreate.self, UserList.self, UserGrantAdmin.self, UserRevoke.self])
}

struct UserCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create", abstract: "Create a user and print their first token (shown once).")

    @Argument(help: "The user's name (letters, digits, - _ . @).")
    var name: String

    @Flag(help: "Give the user the admin role.")
    var admin = false

    @Option(help: "The token expires after this long: 90m, 12h, 30d (default: never; revoke it instead).")
    var expires: ExpiryDuration?

    @OptionGroup var options: IdentityOptions

    func validate() throws { try checkedUserName(name) }

    func run() async throws {
        try await options.run { store in
            let token = try store.createUser(
                name: name, admin: admin, expiresMs: expires.map { Self.nowMs() + $0.seconds * 1000 })
            printToken(token, user: name, json: options.json)
        }
    }

    static func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}

struct UserList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the users, their role and live tokens.")

    @OptionGroup var options: IdentityOptions

    func run() async throws {
        try await options.run { store in
            let users = try store.users()
            if options.json {
                printJSON(
                    .array(
                        users.map { user in
                            .object([
                                JSONMember("name", .string(user.name)), JSONMember("admin", .bool(user.isAdmin)),
                                JSONMember("revoked", .bool(user.isRevoked)),
                                JSONMember("liveTokens", .string(String(user.liveTokens))),
                                JSONMember("created", .string(isoDate(Double(user.createdMs) / 1000))),
                            ])
                        }))
            } else {
                printTable(
                    ["NAME", "ROLE", "TOKENS", "CREATED", "STATE"],
                    users.map {
                        [
                            $0.name, $0.isAdmin ? "admin" : "user", String($0.liveTokens),
                            isoDate(Double($0.createdMs) / 1000), $0.isRevoked ? "revoked" : "active",
                        ]
                    })
            }
        }
    }
}

struct UserGrantAdmin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "grant-admin", abstract: "Give a user the admin role (every replica within about a second).")

    @Argument(help: "The user's name.")
    var name: String

    @OptionGroup var options: IdentityOptions

    func validate() throws { try checkedUserName(name) }

    func run() async throws {
        try await options.run { store in
            try store.setAdmin(name)
            if !options.json {
                print("\(name) is an admin")
            } else {
                printJSON(.object([JSONMember("name", .string(name))]))
            }
        }
    }
}

struct UserRevoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Revoke a user and all their tokens: every replica refuses them within about a second.")

    @Argument(help: "The user's name.")
    var name: String

    @OptionGroup var options: IdentityOptions

    func validate() throws { try checkedUserName(name) }

    func run() async throws {
        try await options.run { store in
            try store.revokeUser(name)
            if !options.json {
                print("\(name) revoked")
            } else {
                printJSON(.object([JSONMember("name", .string(name))]))
            }
        }
    }
}

struct TokenCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Create and revoke users' tokens (the operator's, beside the stack).",
        subcommands: [TokenCreate.self, TokenRevoke.self])
}

struct TokenCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create", abstract: "Create a further token for a user and print it (shown once).")

    @Argument(help: "The user's name.")
    var user: String

    @Option(help: "The token expires after this long: 90m, 12h, 30d (default: never; revoke it instead).")
    var expires: ExpiryDuration?

    @OptionGroup var options: IdentityOptions

    func validate() throws { try checkedUserName(user) }

    func run() async throws {
        try await options.run { store in
            let token = try store.createToken(
                user: user, expiresMs: expires.map { UserCreate.nowMs() + $0.seconds * 1000 })
            printToken(token, user: user, json: options.json)
        }
    }
}

struct TokenRevoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke", abstract: "Revoke one token: every replica refuses it within about a second.")

    @Argument(help: "The token (as `token create` printed it).")
    var token: String

    @OptionGroup var options: IdentityOptions

    func validate() throws {
        guard !token.isEmpty, !token.contains(where: \.isWhitespace) else {
            throw InvalidValue("a token is one word (got \"\(token)\")")
        }
    }

    func run() async throws {
        try await options.run { store in
            try store.revokeToken(token)
            if !options.json { print("token revoked") } else { printJSON(.object([])) }
        }
    }
}

private func printToken(_ token: String, user: String, json: Bool) {
    if json {
        printJSON(.object([JSONMember("name", .string(user)), JSONMember("token", .string(token))]))
    } else {
        print(token)
    }
}

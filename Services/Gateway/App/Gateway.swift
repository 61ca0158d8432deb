import ArgumentParser
import GatewayKit

/// The command-line front of Menagerie: stack-wide commands plus one command group per service, each from its
/// service's CLI library (`Services/<Name>/CLI`) on top of GatewayKit. The groups are `ServiceCommandGroups.all`,
/// which Proto/generate.sh writes from the services' folders (and Package.swift's list of services gives the gateway
/// every `<Name>CLI`), so a new service's group needs no line here; the test-only guestbook's group shows only when
/// the services file lists guestbook.
@main
struct Gateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Talk to Menagerie's services.",
        discussion: """
            Endpoints come from --endpoint SERVICE=HOST:PORT, else MENAGERIE_ENDPOINTS \
            ("zoo=HOST:PORT,HOST:PORT;ocr=HOST:PORT"), else the state compose/compose up wrote.
            A failed call prints its status code and message and exits with that code (INVALID_ARGUMENT 3, \
            NOT_FOUND 5, UNAVAILABLE 14, …); a bad value on the command line exits 3 too, a command line \
            that does not parse (unknown option, missing argument) exits 64, a missing or unreadable input file 66, \
            an output file that cannot be written 73, a result stored with uncertain values 65, a failed status or \
            probe check 1. Errors go to standard error (under --json as {"code", "message"}), results to standard \
            output. Negative numbers are values: --from -33.9,18.4, health add stepCount -100. Shell completion: \
            gateway --generate-completion-script bash|zsh|fish. Calls carry $MENAGERIE_TOKEN, else \
            $MENAGERIE_ADMIN_TOKEN, else the stack's admin token from compose's state, which goes only to that state's \
            endpoints (`gateway user` manages users); no token goes in plaintext to an address neither loopback nor the stack's.
            """,
        subcommands: [Status.self, Probe.self, Methods.self, Stats.self] + ServiceCommandGroups.all + [
            UserCommands.self, TokenCommands.self, ClusterCommands.self,
        ])

    /// ArgumentParser's main, with GatewayKit's one rule for bad values (3) versus usage errors (64).
    static func main() async {
        await GatewayExit.main(Gateway.self)
    }
}

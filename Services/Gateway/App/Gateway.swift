import ArgumentParser
import ClassificationCLI
import OCRCLI
import ZooCLI

/// The command-line front of Menagerie: stack-wide commands plus one command group per service, each from its
/// service's CLI library (`Services/<Name>/CLI`) on top of GatewayKit.
@main
struct Gateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Talk to Menagerie's services.",
        discussion: """
            Endpoints come from --endpoint SERVICE=HOST:PORT, else MENAGERIE_ENDPOINTS \
            ("zoo=HOST:PORT,HOST:PORT;ocr=HOST:PORT"), else the state compose/compose up wrote.
            A failed call prints its status code and message and exits non-zero.
            """,
        subcommands: [Status.self, Probe.self, Methods.self, Stats.self, ZooCommands.self, OCRCommands.self, ClassificationCommands.self])
}

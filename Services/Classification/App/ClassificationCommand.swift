import ArgumentParser
import ServiceKit

/// The classification service executable. It serves health, reflection and stats; its domain methods arrive
/// with the classification issue.
@main
struct ClassificationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "classification", abstract: "Menagerie's classification service.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        try await ServiceRunner.run(name: "classification", options: options) { _ in [] }
    }
}

import ArgumentParser
import ServiceKit

/// The health service executable. It serves health, reflection and stats; its domain methods arrive
/// with the health issue.
@main
struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "health", abstract: "Menagerie's health service.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        try await ServiceRunner.run(name: "health", options: options) { _ in [] }
    }
}

import ArgumentParser
import ServiceKit

/// The zoo service executable.
@main
struct ZooService: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "zoo", abstract: "Menagerie's zoo service: the Prague Zoo lexicon and walking routes.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        try await ServiceRunner.run(name: "zoo", options: options) { _ in [] }
    }
}

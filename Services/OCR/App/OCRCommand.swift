import ArgumentParser
import ServiceKit

/// The ocr service executable. It serves health, reflection and stats; its domain methods arrive
/// with the ocr issue.
@main
struct OCRCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ocr", abstract: "Menagerie's ocr service.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        try await ServiceRunner.run(name: "ocr", options: options) { _ in [] }
    }
}

import Foundation
import StorageTestSupport
import Testing
import TextRecognition

@testable import OCRCore

/// Templates end to end on display-like photos the test renders: light digits on a dark panel, the values
/// changing between photos and a `CHARGING` label that moves about, sometimes between the values.
@Suite struct DisplayTemplateTests {
    static let labels = DisplayPhotos.labels
    static let photos = DisplayPhotos.values
    static func snippets() throws -> [String: Image] { try DisplayPhotos.snippets() }
    static func photo(_ index: Int, _ snippets: [String: Image]) throws -> Data {
        try DisplayPhotos.photo(index, snippets)
    }

    @Test(.enabled(if: TextRenderer.available, "skipped: text2image or DejaVu fonts are missing"))
    func everyValueIsFilledFromItsRegion() async throws {
        let snippets = try Self.snippets()
        let options = RecognitionOptions(segmentation: .sparse)
        let store = try TemplateStore.inMemory(using: .testBackend)

        // The template: the user picks the observations of the first photo's values and names them.
        let first = try await sharedRecognizer.recognize(try Self.photo(0, snippets), options: options)
        #expect(first.pages[0].inverted, "light text on a dark panel was inverted")
        var definitions: [ValueDefinition] = []
        for (label, value) in zip(Self.labels, Self.photos[0]) {
            let picked = try #require(
                first.observations.first { $0.level == .word && $0.text == value },
                "\(value) on the first photo; read: \(first.text)")
            definitions.append(ValueDefinition(name: label, observation: picked))
        }
        let template = try store.createTemplate(
            name: "Battery monitor", values: definitions,
            firstRecord: TemplateMatcher.match(definitions, in: first.observations)
        ).template

        for index in 1..<Self.photos.count {
            let result = try await sharedRecognizer.recognize(try Self.photo(index, snippets), options: options)
            let draft = TemplateMatcher.match(template.values, in: result.observations)
            #expect(draft.map(\.text) == Self.photos[index], "photo \(index); read: \(result.text)")
            #expect(draft.allSatisfy { $0.confidence > 0.5 })
            _ = try store.addRecord(templateID: template.id, values: draft)
        }
        let rows = parseCSV(try store.exportCSV(templateID: template.id))
        // Date, then where it came from (every record here dated at upload), then the values, then the uncertain ones.
        #expect(rows.map { Array($0.dropFirst(2).dropLast()) } == [Self.labels] + Self.photos)
        #expect(rows.map { $0.dropFirst().first } == ["Date source"] + Self.photos.map { _ in "upload" })
    }
}

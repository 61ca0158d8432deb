import Foundation
import Testing
@testable import OCRCore
import TextRecognition

/// Templates end to end on display-like photos the test renders: light digits on a dark panel, the values
/// changing between photos and a `CHARGING` label that moves about, sometimes between the values.
@Suite struct DisplayTemplateTests {
    static let labels = ["Volts", "Amps", "Temp"]
    static let photos = [["12.64", "3.20", "24.5"], ["13.05", "0.85", "22.1"], ["11.92", "7.43", "26.8"]]
    static let distractor = "CHARGING"
    /// Where the distractor sits on each photo.
    static let distractorPlaces = [(560, 610), (250, 205), (80, 30)]

    /// Every snippet of text, cut out of one rendered sheet.
    static func snippets() throws -> [String: Image] {
        let texts = labels + photos.flatMap { $0 } + [distractor]
        let sheet = try TextRenderer.render(texts, points: 14, width: 900, height: 1700)
        var cut: [String: Image] = [:]
        for (text, box) in zip(texts, sheet.lineBoxes) {
            cut[text] = try sheet.image.cropped(
                to: PixelRect(x: box.x - 4, y: box.y - 4, width: box.width + 8, height: box.height + 8))
        }
        return cut
    }

    static func photo(_ index: Int, _ snippets: [String: Image]) throws -> Data {
        var panel = try Image.blank(width: 1000, height: 700, gray: 60)
        for (row, label) in labels.enumerated() {
            panel = try panel.painting(snippets[label]!, x: 80, y: 120 + 180 * row, gray: 235)
            panel = try panel.painting(snippets[photos[index][row]]!, x: 560, y: 120 + 180 * row, gray: 235)
        }
        let (x, y) = distractorPlaces[index]
        panel = try panel.painting(snippets[distractor]!, x: x, y: y, gray: 235)
        return try panel.encoded(as: .png)
    }

    @Test(.enabled(if: TextRenderer.available, "skipped: text2image or DejaVu fonts are missing"))
    func everyValueIsFilledFromItsRegion() async throws {
        let snippets = try Self.snippets()
        let options = RecognitionOptions(segmentation: .sparse)
        let store = try TemplateStore.inMemory()

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
            firstRecord: TemplateMatcher.match(definitions, in: first.observations)).template

        for index in 1..<Self.photos.count {
            let result = try await sharedRecognizer.recognize(try Self.photo(index, snippets), options: options)
            let draft = TemplateMatcher.match(template.values, in: result.observations)
            #expect(draft.map(\.text) == Self.photos[index], "photo \(index); read: \(result.text)")
            #expect(draft.allSatisfy { $0.confidence > 0.5 })
            _ = try store.addRecord(templateID: template.id, values: draft)
        }
        let rows = parseCSV(try store.exportCSV(templateID: template.id))
        #expect(rows.map { Array($0.dropFirst()) } == [Self.labels] + Self.photos)
    }
}

import Foundation
import Testing

@testable import HealthCore

/// Metadata is stored as JSON written and read by hand (for speed); both directions must agree with JSON
/// itself, whatever the text holds.
@Suite struct MetadataCodingTests {
    static let awkward: [MetadataEntry] = [
        MetadataEntry("HKDevice", "<<HKDevice: 0x283e3c0a0>, name:Apple Watch, software:10.4>"),
        MetadataEntry("quote \" and \\ backslash", "tab\tnewline\nreturn\r"),
        MetadataEntry("controls", "\u{0}\u{1}\u{1F}"),
        MetadataEntry("unicode", "Jana’s Želva 🐢 e\u{301}"),
        MetadataEntry("", ""),
    ]

    @Test func roundTripsAndIsValidJSON() throws {
        let text = try #require(MetadataCoding.encode(Self.awkward))
        #expect(MetadataCoding.decode(text) == Self.awkward)
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String]])
        #expect(parsed.map { MetadataEntry($0[0], $0[1]) } == Self.awkward)
        #expect(MetadataCoding.encode([]) == nil)
        #expect(MetadataCoding.decode(nil) == [])
        #expect(MetadataCoding.decode("[]") == [])
    }

    /// JSON written by others: escapes this encoder never writes (surrogate pairs, `\/`), and whitespace, which
    /// the fast reader leaves to JSONSerialization.
    @Test func readsOtherJSONWriters() {
        #expect(MetadataCoding.decode(#"[["a\/b","\ud83d\udc22 \u017d"]]"#) == [MetadataEntry("a/b", "🐢 Ž")])
        #expect(MetadataCoding.decode(#"[ [ "k" , "v" ] ]"#) == [MetadataEntry("k", "v")])
        #expect(MetadataCoding.decode("not json") == [])
        #expect(MetadataCoding.decode(#"[["only key"]]"#) == [])
    }
}

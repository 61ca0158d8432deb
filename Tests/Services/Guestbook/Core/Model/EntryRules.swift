/// What a note may hold. The rules live in the domain, not the handlers, so every way in (RPC, a test, a future
/// import) refuses the same notes with the same message. Field names in messages are the proto's.
public enum EntryRules {
    public static let maxTextLength = 500
    public static let maxAuthorLength = 80

    /// Checks a new note's values.
    public static func check(animalID: Int64, author: String, text: String) throws {
        try checkAnimalID(animalID)
        guard !text.allSatisfy(\.isWhitespace) else { throw GuestbookError.invalid("text", "must not be empty") }
        guard scalarCount(text, atMost: maxTextLength) else {
            throw GuestbookError.invalid("text", "is longer than \(maxTextLength) characters")
        }
        guard scalarCount(author, atMost: maxAuthorLength) else {
            throw GuestbookError.invalid("author", "is longer than \(maxAuthorLength) characters")
        }
    }

    public static func checkAnimalID(_ id: Int64, field: String = "animal_id") throws {
        guard id > 0 else { throw GuestbookError.invalid(field, "must be a positive animal id, got \(id)") }
    }

    /// Whether `value` has at most `limit` Unicode scalars. Scalars, not characters: counting grapheme clusters
    /// in a string of one letter and millions of combining marks costs seconds; the UTF-8 length bounds the
    /// count first, at no cost.
    static func scalarCount(_ value: String, atMost limit: Int) -> Bool {
        let bytes = value.utf8.count
        if bytes <= limit { return true }
        return bytes <= 4 * limit && value.unicodeScalars.count <= limit
    }
}

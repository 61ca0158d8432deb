/// A visitor's note about an animal, as stored.
public struct GuestbookEntry: Sendable, Hashable {
    public let id: Int64
    public let animalID: Int64
    /// Empty for an anonymous note.
    public let author: String
    public let text: String
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public let createdMs: Int64

    public init(id: Int64, animalID: Int64, author: String, text: String, createdMs: Int64) {
        self.id = id
        self.animalID = animalID
        self.author = author
        self.text = text
        self.createdMs = createdMs
    }
}

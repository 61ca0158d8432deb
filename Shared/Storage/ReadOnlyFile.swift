import Foundation

extension Database {
    /// Runs `body` on the SQLite file at `path` opened read-only and immutable, then closes it: for checking a
    /// file the service did not make (an upload) before keeping it. Immutable means SQLite takes no locks and
    /// creates no journal, WAL or shm file beside it, so the file's bytes stay exactly as they came.
    ///
    /// Throws `.corrupt`-kind errors (SQLITE_NOTADB) at the first statement when the file is not a database.
    public static func inspectReadOnly<T>(fileAt path: String, _ body: (Connection) throws -> T) throws -> T {
        // A URI path escapes the characters URI syntax gives a meaning to.
        var escaped = ""
        for character in path.unicodeScalars {
            switch character {
            case "%", "?", "#": escaped += String(format: "%%%02X", character.value)
            default: escaped.unicodeScalars.append(character)
            }
        }
        let handle = try SQLiteHandle(location: "file:\(escaped)?mode=ro&immutable=1", uri: true, busyTimeout: .zero)
        let connection = Connection(handle)
        defer { connection.close() }
        return try body(connection)
    }
}

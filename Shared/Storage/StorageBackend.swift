#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the databases tests make for themselves (`Database.inMemory`, `Database.scratch`) run on: the one reading
/// of `MENAGERIE_STORAGE_BACKEND`, so that every suite, and every store built on them, agrees on it.
public enum StorageBackend: String, Sendable {
    case sqlite, dqlite

    /// `MENAGERIE_STORAGE_BACKEND`, SQLite when it is unset; any other value is `.misuse` (a typo must not quietly
    /// run a suite on the other backend).
    public static func forTests() throws(StorageError) -> StorageBackend {
        guard let value = getenv("MENAGERIE_STORAGE_BACKEND").map({ String(cString: $0) }) else { return .sqlite }
        guard let backend = StorageBackend(rawValue: value) else {
            throw StorageError(.misuse, message: "MENAGERIE_STORAGE_BACKEND is sqlite or dqlite, not \"\(value)\"")
        }
        return backend
    }
}

import Dqlite
import Storage
import Synchronization
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The one-node dqlite cluster behind `DatabaseFactory.testBackend` when `MENAGERIE_STORAGE_BACKEND=dqlite`: started
/// on first use on a free loopback port, its Raft log in a fresh temporary directory, and kept for the life of the
/// process. Each database opened on it is a database of its own (a fresh name), so tests stay isolated.
final class TestCluster: Sendable {
    static let shared = TestCluster()

    private let node = Mutex<Result<DqliteNode, StorageError>?>(nil)

    /// A client of a database nobody else uses, or of the one called `database`.
    func client(database: String? = nil) throws -> DqliteClient {
        let node = try self.node.withLock { started in
            if started == nil { started = Result { () throws(StorageError) in try Self.start() } }
            return try started!.get()
        }
        do {
            return try DqliteClient(
                addresses: [node.address], database: database ?? "test-\(UInt64.random(in: .min ... .max))",
                callTimeout: TestTime.scaled(.seconds(5)), leaderWait: TestTime.scaled(.seconds(10)))
        } catch {
            throw StorageError(.open, message: "cannot reach the test dqlite node: \(error)")
        }
    }

    private static func start() throws(StorageError) -> DqliteNode {
        var template = Array("/tmp/menagerie-dqlite-XXXXXX".utf8CString)
        guard
            let directory = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }).map({
                String(cString: $0)
            })
        else { throw StorageError(.open, message: "cannot create a directory for the test dqlite node") }
        do {
            let node = try DqliteNode(
                id: 1, address: "127.0.0.1:\(try freeLoopbackPort())", dataDirectory: directory,
                networkLatency: .milliseconds(5))
            try node.start()
            return node
        } catch let error as DqliteError {
            throw StorageError(.open, message: "cannot start the test dqlite node: \(error)")
        } catch {
            throw StorageError(.open, message: "cannot start the test dqlite node: \(error)")
        }
    }

    /// A port the kernel says is free on 127.0.0.1 now.
    private static func freeLoopbackPort() throws(StorageError) -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else { throw StorageError(.open, message: "no free loopback port for the test dqlite node") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

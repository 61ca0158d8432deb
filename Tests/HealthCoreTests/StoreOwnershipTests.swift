import Foundation
import Storage
import StorageTestSupport
import Testing

@testable import HealthCore

/// A device store belongs to the account that first synced it, on the device and on the server, and stores and
/// servers from before store binding (schema version 1) migrate: what was unambiguous is bound, the rest is bound
/// by its next sync.
@Suite struct StoreOwnershipTests {
    let server: HealthStore
    let alice: HealthUser, bob: HealthUser

    init() throws {
        server = try HealthStore.inMemory(using: .testBackend)
        alice = try server.createUser(name: "alice").user
        bob = try server.createUser(name: "bob").user
    }

    func owner(_ user: HealthUser) -> StoreOwner { StoreOwner(id: user.id, name: user.name) }
    func remote(_ user: HealthUser) -> InProcessRemote { InProcessRemote(server: server, user: user.id) }
    func steps(_ count: Int) -> [HealthSample] {
        (0..<count).map {
            HealthSample(
                type: .stepCount, value: 10, start: T.ms("2026-05-01T08:00:00Z") + Int64($0) * 60_000,
                end: T.ms("2026-05-01T08:01:00Z") + Int64($0) * 60_000, source: "iPhone")
        }
    }

    static func permissionDenied(_ body: () async throws -> Void) async -> HealthError? {
        do {
            try await body()
            return nil
        } catch let error as HealthError {
            return error.category == .permissionDenied ? error : nil
        } catch { return nil }
    }

    @Test func theFirstSyncBindsTheStoreAndAnotherUserIsRefusedOnBothSides() async throws {
        let phone = try DeviceStore.inMemory(using: .testBackend)
        _ = try phone.add(steps(2))
        #expect(try phone.owner() == nil)
        _ = try await HealthSync(device: phone, remote: remote(alice), account: owner(alice), token: "t-alice").run()
        #expect(try phone.owner() == owner(alice))
        #expect(try phone.isOwnerToken("t-alice") && !phone.isOwnerToken("t-bob"))

        // The device refuses before any call; the server refuses a sync that skips the device's check.
        let local = await Self.permissionDenied {
            _ = try await HealthSync(device: phone, remote: remote(bob), account: owner(bob)).run()
        }
        #expect(
            local?.message.contains("belongs to alice") == true && local?.message.contains("--store PATH") == true,
            "\(String(describing: local))")
        let byServer = await Self.permissionDenied {
            _ = try await HealthSync(device: phone, remote: remote(bob)).run()
        }
        #expect(byServer?.message.contains("belongs to alice") == true, "\(String(describing: byServer))")
        #expect(try server.sampleCount(user: bob.id) == 0)
        // The same user by another token (no token at all here) still syncs.
        let again = try await HealthSync(device: phone, remote: remote(alice), account: owner(alice)).run()
        #expect(again.pushedChanges == 0)
        // The same user is the same id, whatever the name says; a server that gives no id is compared by name.
        #expect(StoreOwner(id: 1, name: "a").isSameUser(as: StoreOwner(id: 1, name: "b")))
        #expect(!StoreOwner(id: 1, name: "a").isSameUser(as: StoreOwner(id: 2, name: "a")))
        #expect(StoreOwner(id: 0, name: "a").isSameUser(as: StoreOwner(id: 2, name: "a")))
    }

    /// Version-1 files: a server binds each store only one user pushed from, and leaves one pushed under two users
    /// (the leak) to its next sync; a device store without an owner is bound by its first sync after the upgrade.
    @Test func storesAndServersFromBeforeBindingMigrate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ownership-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let serverPath = directory.appendingPathComponent("health.sqlite").path,
            devicePath = directory.appendingPathComponent("device.sqlite").path
        try Self.writeVersion1(server: serverPath, device: devicePath)
        let upgraded = try HealthStore(path: serverPath)
        try upgraded.bindStore(device: "phone", user: 1)
        #expect(throws: HealthError.self) { try upgraded.bindStore(device: "phone", user: 2) }
        try upgraded.bindStore(device: "shared", user: 2)  // unbound by the migration: bob's sync binds it now
        #expect(throws: HealthError.self) { try upgraded.bindStore(device: "shared", user: 1) }

        let tablet = try DeviceStore(path: devicePath)
        #expect(try tablet.deviceID == "tablet" && tablet.owner() == nil)
        let bobOnServer = InProcessRemote(server: upgraded, user: 2)
        _ = try await HealthSync(device: tablet, remote: bobOnServer, account: StoreOwner(id: 2, name: "bob")).run()
        #expect(try tablet.owner() == StoreOwner(id: 2, name: "bob"))
    }

    /// A server and a device store as schema version 1 left them.
    static func writeVersion1(server: String, device: String) throws {
        let old = try Database(path: server, migrations: [HealthSchema.migrations[0]])
        try old.write { db in
            try db.execute("INSERT INTO users (id, name, created_ms) VALUES (1, 'alice', 0), (2, 'bob', 0)")
            try db.execute(
                "INSERT INTO push_cursors (user_id, device, scope, anchor) VALUES (1, 'phone', '', 5), (1, 'phone', 'x', 2), (1, 'shared', '', 3), (2, 'shared', '', 4)"
            )
        }
        let oldDevice = try Database(path: device, migrations: [HealthSchema.migrations[0]])
        try oldDevice.write { db in
            try db.execute("INSERT INTO users (id, name, created_ms) VALUES (1, 'device', 0)")
            try db.execute("INSERT INTO device (id, device_id) VALUES (1, 'tablet')")
        }
    }
}

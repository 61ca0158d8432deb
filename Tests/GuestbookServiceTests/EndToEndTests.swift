import ArgumentParser
import Foundation
import GuestbookAPI
import GuestbookCLI
import RPC
import RPCWire
import Schema
import TestSupport
import Testing
import Transport

/// The built `guestbook` executable, run as a user runs a service: it answers its typed client
/// over TCP, Health/Check and reflection like every service, its CLI group works against it, and SIGTERM stops it
/// with status 0. This is the check that a service added by README's "Adding a service" path really works.
@Suite struct EndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let executable =
        (ProcessInfo.processInfo.environment["MENAGERIE_BIN_DIR"] ?? root.appendingPathComponent(".build/debug").path)
        + "/guestbook"

    @Test func theExecutableServesItsClientHealthReflectionAndCLIThenStopsOnSIGTERM() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.executable),
            "no \(Self.executable): build it with swift build --build-tests (or set MENAGERIE_BIN_DIR)")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "guestbook-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = try RawSocket.freePortBlock(count: 1)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = [
            "--port", "\(port)", "--data-dir", directory.path, "--log-level", "warning", "--shutdown-grace", "5",
        ]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer {
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
        let rpc = RPCClient(transports: [try TCPClientTransport(endpoint: "127.0.0.1:\(port)")])
        defer { rpc.close() }

        // Health/Check: SERVING, from this very process.
        var health: RpcV1.HealthCheckResponse?
        for _ in 0..<600 where process.isRunning {
            health = try? await rpc.unary(
                RpcV1.Health.check, RpcV1.HealthCheckRequest(), options: CallOptions(timeout: .seconds(1)))
            if health?.pid == Int64(process.processIdentifier) { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let answer = try #require(health, "guestbook did not answer on port \(port)")
        #expect(answer.pid == Int64(process.processIdentifier))
        #expect(answer.status == .serving)
        #expect(answer.serverName == "guestbook")

        // Reflection lists the service and its methods, and the Jobs service beside it.
        let services = try await rpc.unary(RpcV1.Reflection.listServices, RpcV1.ListServicesRequest()).services
        let guestbook = try #require(
            services.first { $0.name == "menagerie.guestbook.v1.Guestbook" }, "\(services.map(\.name))")
        #expect(
            Set(guestbook.methods.map(\.path))
                == Set(
                    ["AddEntry", "GetEntry", "ListEntries", "WatchEntries", "DeleteEntry", "CountEntries"].map {
                        "/menagerie.guestbook.v1.Guestbook/\($0)"
                    }))

        #expect(services.contains { $0.name == "menagerie.jobs.v1.Jobs" }, "\(services.map(\.name))")

        // The generated typed client over TCP: a unary call and a server stream.
        let client = GuestbookV1.Guestbook.Client(wrapping: rpc)
        let added = try await client.addEntry(.init(animalID: 4, author: "Eva", text: "Slon se koupal."))
        var watched: [GuestbookV1.Entry] = []
        for try await entry in client.watchEntries(.init(animalID: 4, afterID: 0, count: 1)) { watched.append(entry) }
        #expect(watched == [added])

        // The levels guestbook.proto declares: removing a note is the admin's, counting a user's; without a token
        // both are UNAUTHENTICATED before any handler runs.
        let keptForUsers: [@Sendable () async throws -> Void] = [
            { _ = try await client.deleteEntry(.init(id: added.id)) },
            { _ = try await client.countEntries(.init(animalID: 4)) },
        ]
        for call in keptForUsers {
            do {
                try await call()
                Issue.record("a call the proto keeps for users ran without a token")
            } catch let error as RPCError {
                #expect(error.code == .unauthenticated, "\(error)")
            }
        }

        // The CLI group, in process, against this instance: a command that succeeds stores its note...
        let endpoint = "guestbook=127.0.0.1:\(port)"
        var add = try #require(
            try GuestbookCommands.parseAsRoot(["add", "4", "Chobot!", "--author", "Jan", "--endpoint", endpoint])
                as? AsyncParsableCommand)
        try await add.run()
        let page = try await client.listEntries(.init(animalID: 4))
        #expect(page.entries.map(\.text) == ["Slon se koupal.", "Chobot!"])
        #expect(page.entries.last?.author == "Jan")
        // ...and one that fails exits with the status's code (NOT_FOUND is 5), as every service's group does.
        var show = try #require(
            try GuestbookCommands.parseAsRoot(["show", "999", "--endpoint", endpoint, "--json"])
                as? AsyncParsableCommand)
        do {
            try await show.run()
            Issue.record("show 999 succeeded")
        } catch let exit as ExitCode {
            #expect(exit.rawValue == 5)
        }

        // SIGTERM: a graceful stop, exit status 0.
        process.terminate()
        try await offPool { process.waitUntilExit() }
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
    }
}

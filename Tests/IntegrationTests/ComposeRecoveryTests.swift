import Foundation
import TestSupport
import Testing

/// compose when things go wrong: a replica that dies, a service that cannot start, state left behind.
@Suite(.serialized) struct ComposeRecoveryTests {
    /// A MENAGERIE_BIN_DIR in the stack's directory with the build's gateway and menagerie-compose, for a test to put
    /// a service's binary of its own beside them.
    static func binDirectory(_ stack: Stack) throws -> URL {
        let bin = stack.directory.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        for program in ["gateway", "menagerie-compose"] {
            try FileManager.default.createSymbolicLink(
                atPath: bin.appendingPathComponent(program).path,
                withDestinationPath: "\(Stack.binDirectory)/\(program)")
        }
        return bin
    }

    @Test func aDeadReplicasPidIsNotKeptDuringItsBackOff() async throws {
        try await Stack.with(services: ["zoo"]) { stack in
            let up = try await stack.compose("up")
            try #require(up.status == 0, "\(up.output)")
            let victim = try #require(try stack.servicePids()["zoo.0"])
            kill(victim, SIGKILL)
            // The supervisor notices at once and waits 1 s before restarting; meanwhile the dead pid is not the replica's.
            try await Task.sleep(for: .milliseconds(400))
            #expect(
                try stack.servicePids()["zoo.0"] != victim,
                "the pid file still names the dead replica during its back-off")
            let ps = try await stack.compose("ps")
            #expect(!ps.output.contains(" \(victim) "), "\(ps.output)")
        }
    }

    @Test func upStartsEveryServiceItCanAndNamesEachThatFailed() async throws {
        try await Stack.with(services: ["zoo", "ocr"]) { stack in
            // zoo comes first and cannot bind its port; ocr must start all the same.
            let blocker = try Stack.spawn(
                "\(Stack.binDirectory)/ocr",
                [
                    "--port", "\(try #require(stack.basePorts["zoo"]))",
                    "--data-dir", stack.directory.appendingPathComponent("blocker").path,
                ])
            defer {
                if blocker.isRunning {
                    blocker.terminate()
                    blocker.waitUntilExit()
                }
            }
            try await Stack.waitServing(port: try #require(stack.basePorts["zoo"]))

            let up = try await stack.compose(environment: ["MENAGERIE_START_TIMEOUT": Stack.scaledSeconds(4)], ["up"])
            #expect(up.status == 1, "\(up.output)")
            #expect(up.output.contains("1 replica(s) did not report SERVING: zoo.0"), "\(up.output)")
            let status = try await stack.gateway(["status", "--json"])
            #expect(
                try statusInstances(status.output).contains {
                    $0["service"] as? String == "ocr" && $0["health"] as? String == "SERVING"
                },
                "ocr was not started after zoo failed: \(status.output)")
        }
    }

    /// A replica that crashes while starting leaves a backtrace whose tail is registers and images: up shows where it
    /// crashed (the report's head and the crashed thread's frames), not only those last lines. (CI once showed only
    /// the registers of an ocr that aborted on three nodes, which left nothing to go on.)
    @Test func aReplicaThatCrashesWhileStartingIsReportedWithItsCrashedFrames() async throws {
        try await Stack.with(services: ["zoo"]) { stack in
            let bin = try Self.binDirectory(stack)
            // A zoo that crashes as a Swift program does, with a backtrace longer than a log's tail.
            let zoo = bin.appendingPathComponent("zoo")
            try """
            #!/bin/sh
            echo "started as $0"
            echo "💣 Program crashed: Aborted at 0x00000000000004d2"
            echo "Thread 2 crashed:"
            echo "0 0x00007f65881c0eec __pthread_kill_implementation + 268 in libc.so.6"
            echo "1 0x00007f6588177012 raise + 17 in libc.so.6"
            echo "2 0x00007f6588161468 abort + 208 in libc.so.6"
            echo "3 0x00007f6589a3c1f0 ERRCODE::error + 400 in libtesseract.so.5"
            i=0; while [ $i -lt 60 ]; do echo "r$i 0x0000000000000000"; i=$((i + 1)); done
            kill -ABRT $$

            """.write(to: zoo, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: zoo.path)
            let up = try await stack.compose(
                environment: ["MENAGERIE_BIN_DIR": bin.path, "MENAGERIE_START_TIMEOUT": Stack.scaledSeconds(2)], ["up"])
            #expect(up.status == 1, "\(up.output)")
            #expect(up.output.contains("Program crashed: Aborted"), "\(up.output)")
            #expect(up.output.contains("ERRCODE::error + 400 in libtesseract.so.5"), "\(up.output)")
            #expect(up.output.contains("r59 0x0000000000000000"), "the log's tail is shown too: \(up.output)")
            #expect(up.output.contains("did not report SERVING"), "\(up.output)")
        }
    }

    /// `up` after a rebuild restarts a replica whose binary was replaced since it started (a user who pulled, then ran
    /// up, had the old code serving while up said the stack was up); one whose binary is unchanged keeps running.
    @Test func upRestartsAReplicaWhoseBinaryWasRebuilt() async throws {
        try await Stack.with(services: ["zoo"]) { stack in
            let bin = try Self.binDirectory(stack)
            let zoo = bin.appendingPathComponent("zoo")
            try FileManager.default.copyItem(atPath: "\(Stack.binDirectory)/zoo", toPath: zoo.path)
            let environment = ["MENAGERIE_BIN_DIR": bin.path]
            let up = try await stack.compose(environment: environment, ["up"])
            try #require(up.status == 0, "\(up.output)")
            let first = try #require(try stack.servicePids()["zoo.0"])
            let again = try await stack.compose(environment: environment, ["up"])
            #expect(again.status == 0 && !again.output.contains("restarting"), "\(again.output)")
            #expect(try stack.servicePids()["zoo.0"] == first, "an unchanged replica was restarted")
            // A build links a new file in the binary's place.
            let rebuilt = bin.appendingPathComponent("zoo.new")
            try FileManager.default.copyItem(atPath: "\(Stack.binDirectory)/zoo", toPath: rebuilt.path)
            #expect(rename(rebuilt.path, zoo.path) == 0)
            let after = try await stack.compose(environment: environment, ["up"])
            #expect(after.status == 0, "\(after.output)")
            #expect(
                after.output.contains("restarting zoo.0: its binary was rebuilt since it started"), "\(after.output)")
            let second = try #require(try stack.servicePids()["zoo.0"])
            #expect(second != first)
            let status = try await stack.gateway(["status"])
            #expect(status.output.contains("SERVING"), "\(status.output)")
        }
    }

    @Test func downWithNothingRunningForgetsTheScaledCounts() async throws {
        try await Stack.with(services: ["zoo"]) { stack in
            // What a scale to 2 leaves behind when its replicas are gone (a reboot, say).
            let replicas = stack.state.appendingPathComponent("replicas")
            try FileManager.default.createDirectory(at: replicas, withIntermediateDirectories: true)
            try "2\n".write(to: replicas.appendingPathComponent("zoo"), atomically: true, encoding: .utf8)
            let down = try await stack.compose("down")
            #expect(down.status == 0 && down.output.contains("nothing running"), "\(down.output)")
            #expect(!FileManager.default.fileExists(atPath: replicas.path), "down kept the scaled counts")
        }
    }

    @Test func followingLogsWaitsForReplicasAndTakesInThoseAddedLater() async throws {
        var directory = ""
        try await Stack.with(services: ["zoo"]) { stack in
            directory = stack.directory.path
            let output = stack.directory.appendingPathComponent("follow.log")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let handle = try FileHandle(forWritingTo: output)
            // Followed before anything runs (no log yet), in a process group of its own, so that the test can end it
            // with its tails (processes Foundation starts have SIGTERM blocked, so compose's own trap would never run).
            let follow = Process()
            follow.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
            follow.arguments = [Stack.root.appendingPathComponent("compose/compose").path, "logs", "-f", "zoo"]
            follow.environment = stack.environment
            follow.standardOutput = handle
            follow.standardError = handle
            follow.standardInput = FileHandle.nullDevice
            try follow.run()
            defer {
                if follow.isRunning { kill(-follow.processIdentifier, SIGKILL) }
                try? handle.close()
            }
            try await Task.sleep(for: .milliseconds(500))
            #expect(follow.isRunning, "logs -f stopped as no replica had logged yet")
            let base = try #require(stack.basePorts["zoo"])
            func waitForLine(of replica: String, port: Int) async throws -> String {
                var text = ""
                for _ in 0..<Int(100 * TestTime.scale)
                where !text.contains("\(replica) | ") || !text.contains(":\(port)") {
                    try await Task.sleep(for: .milliseconds(100))
                    text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
                }
                return text
            }
            let up = try await stack.compose("up")
            try #require(up.status == 0, "\(up.output)")
            // Each replica logs the port it listens on when it starts.
            let first = try await waitForLine(of: "zoo.0", port: base)
            #expect(
                first.contains("zoo.0 | ") && first.contains(":\(base)"),
                "logs -f did not show the replica started after it: \(first)")
            let scale = try await stack.compose("scale", "zoo=2")
            try #require(scale.status == 0, "\(scale.output)")
            let text = try await waitForLine(of: "zoo.1", port: base + 1)
            #expect(
                text.contains("zoo.1 | ") && text.contains(":\(base + 1)"),
                "logs -f did not show the replica added later: \(text)")
        }
        // Once the stack's state is gone, the follower and its tails are gone too (they stayed, one set per run).
        var left: [String] = []
        for _ in 0..<Int(50 * TestTime.scale) {
            left = Self.processes(mentioning: directory)
            if left.isEmpty { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(left.isEmpty, "still running after the stack was removed: \(left)")
    }

    /// A node's replica's lines are followed behind `nodeN/SERVICE.I` (the bash follower gave that name to sed as part
    /// of an `s/^/…/` command, whose slash broke it: a stack on nodes showed nothing).
    @Test func followingLogsNamesANodesReplicaByItsNode() async throws {
        try await Stack.with(services: ["zoo"]) { stack in
            let logs = stack.state.appendingPathComponent("nodes/2/logs")
            try FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
            try "listening on 10.231.0.12\n".write(
                to: logs.appendingPathComponent("zoo.0.log"), atomically: true, encoding: .utf8)
            let output = stack.directory.appendingPathComponent("follow.log")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let handle = try FileHandle(forWritingTo: output)
            let follow = Process()
            follow.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
            follow.arguments = [Stack.root.appendingPathComponent("compose/compose").path, "logs", "-f", "zoo"]
            follow.environment = stack.environment
            follow.standardOutput = handle
            follow.standardError = handle
            follow.standardInput = FileHandle.nullDevice
            try follow.run()
            defer {
                if follow.isRunning { kill(-follow.processIdentifier, SIGKILL) }
                try? handle.close()
            }
            var text = ""
            for _ in 0..<Int(50 * TestTime.scale) where !text.contains("node2/zoo.0 | listening on 10.231.0.12") {
                try await Task.sleep(for: .milliseconds(100))
                text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            }
            #expect(text.contains("node2/zoo.0 | listening on 10.231.0.12\n"), "\(text)")
        }
    }

    /// Command lines of live processes that mention `text`.
    static func processes(mentioning text: String) -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { Int($0) != nil }.compactMap { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
            let line = String(decoding: data.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
            return line.contains(text) ? "\(pid): \(line)" : nil
        }
    }
}

import Foundation
import GatewayKit
import JobsAPI
import RPC
import Schema
import Testing

/// How the gateway shows a watched job: a bar redrawn in place on a terminal, plain lines otherwise.
@Suite struct JobDisplayTests {
    final class Sink: @unchecked Sendable { var text = "" }

    private static let snapshots: [JobsV1.Job] = [
        JobsV1.Job(id: "j1", kind: "zoo.import", state: .queued),
        JobsV1.Job(id: "j1", kind: "zoo.import", state: .running, progress: 0.1, message: "parsing"),
        JobsV1.Job(id: "j1", kind: "zoo.import", state: .running, progress: 0.1, message: "parsing"),  // repeated
        JobsV1.Job(id: "j1", kind: "zoo.import", state: .running, progress: 0.5, message: "writing 1200 animals"),
        JobsV1.Job(id: "j1", kind: "zoo.import", state: .succeeded, progress: 1),
    ]

    private func render(_ snapshots: [JobsV1.Job], terminal: Bool) -> String {
        let sink = Sink()
        var progress = JobProgress(display: ProgressDisplay(isTerminal: terminal) { sink.text += $0 })
        for job in snapshots { progress.show(job) }
        progress.finish()
        return sink.text
    }

    @Test func onATerminalTheBarIsRedrawnInPlace() {
        let text = render(Self.snapshots, terminal: true)
        #expect(
            text == "\r[                              ]   0% queued\u{1B}[K"
                + "\r[###                           ]  10% parsing\u{1B}[K"
                + "\r[###############               ]  50% writing 1200 animals\u{1B}[K"
                + "\r[##############################] 100% done\u{1B}[K\n")
    }

    @Test func otherwiseEachChangeIsOneLine() {
        let text = render(Self.snapshots, terminal: false)
        #expect(text == "0% queued\n10% parsing\n50% writing 1200 animals\n100% done\n")
    }

    @Test func aFailedJobEndsTheBarAndThrowsItsStatus() {
        let failed = JobsV1.Job(
            id: "j2", kind: "zoo.import", state: .failed, progress: 0.3,
            error: JobsV1.JobError(code: StatusCode.invalidArgument.rawValue, message: "broken.json: not JSON"))
        #expect(render([failed], terminal: false) == "30% failed\n")
        #expect(throws: RPCError(.invalidArgument, "job j2 failed: broken.json: not JSON")) {
            _ = try failed.requireResult()
        }
        #expect(failed.summary == "job j2 (zoo.import) failed: INVALID_ARGUMENT: broken.json: not JSON")
        let running = JobsV1.Job(id: "j3", kind: "zoo.import", state: .running, progress: 0.25, message: "parsing")
        #expect(running.summary == "job j3 (zoo.import) running 25%: parsing")
        #expect(throws: RPCError.self) { _ = try running.requireResult() }
    }

    @Test func jobsAsJSON() throws {
        let job = JobsV1.Job(
            id: "j4", kind: "zoo.import", state: .cancelled, createdAt: 0, finishedAt: 60,
            error: JobsV1.JobError(code: 1, message: "the job was cancelled"), cancelRequested: true)
        let json = job.outputJSON  // protobuf's JSON mapping, defaults printed
        #expect(json["state"] == .string("JOB_STATE_CANCELLED"))
        #expect(json["createdAt"]?.doubleValue == 0 && json["finishedAt"]?.doubleValue == 60)
        #expect(json["startedAt"] == nil, "an unset optional stays absent")
        #expect(
            json["error"]
                == .object([JSONMember("code", .number(1)), JSONMember("message", .string("the job was cancelled"))]))
        #expect(JobsV1.JobState(name: "RUNNING") == .running)
        #expect(JobsV1.JobState(name: "unspecified") == nil)
    }
}

/// `gateway <service> jobs …` parses for any service (its options must not clash with the global ones).
@Suite struct JobsCommandsTests {
    enum Fake: JobsCommandService { static let serviceName = "fake" }

    @Test func everySubcommandParses() throws {
        for arguments in [
            [
                "list", "--job-state", "running", "--job-state", "failed", "--kind", "fake.x", "--page-size", "5",
                "--state", "/tmp",
            ],
            ["show", "j1", "--json"], ["watch", "j1", "--endpoint", "fake=127.0.0.1:1"], ["cancel", "j1"],
        ] {
            _ = try JobsCommands<Fake>.parseAsRoot(arguments)
        }
        #expect(throws: (any Error).self) {
            _ = try JobsCommands<Fake>.parseAsRoot(["list", "--job-state", "sleeping"])
        }
        #expect(JobsCommands<Fake>.configuration.commandName == "jobs")
    }
}

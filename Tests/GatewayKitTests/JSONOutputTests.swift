import GatewayKit
import JobsAPI
import OCRAPI
import RPC
import Schema
import Testing

/// What `--json` prints: the response's JSON mapping with defaults, and one shape for errors.
@Suite struct JSONOutputTests {
    @Test func responsesPrintEveryFieldWithoutPresence() {
        let job = JobsV1.Job(id: "j1", kind: "zoo.import", state: .running)
        let json = job.outputJSON
        #expect(json["state"] == .string("JOB_STATE_RUNNING"))
        #expect(json["progress"]?.doubleValue == 0 && json["cancelRequested"] == .bool(false), "defaults are printed")
        #expect(json["error"] == nil && json["result"] == nil, "unset messages stay absent")
        let box = OcrV1.Observation(box: OcrV1.NormalizedBox(x: 0, y: 0.5)).outputJSON
        #expect(box["box"]?["x"]?.doubleValue == 0, "a box at x = 0 still shows x")
    }

    @Test func errorsHaveOneShapeWithConnectCodeNames() {
        #expect(
            RPCError(.notFound, "no animal 42").outputJSON.serialized()
                == #"{"code":"not_found","message":"no animal 42"}"#)
        #expect(
            StatusCode.all.map(\.connectName) == [
                "ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists",
                "permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range",
                "unimplemented",
                "internal", "unavailable", "data_loss", "unauthenticated",
            ])
    }
}

import Foundation
import TestSupport
import Testing

/// `compose up --tls`: the stack's own CA, every replica TLS-only, and the gateway finding its client
/// certificate in compose's state; each way of calling it wrongly refused with a clear error.
@Suite(.serialized) struct TLSStackTests {
    @Test func composeUpTLSServesTheGatewayOverMutualTLSAndRefusesEveryoneElse() async throws {
        try await Stack.with(services: ["zoo"]) { stack in
            let up = try await stack.compose("up", "--tls")
            try #require(up.status == 0, "compose up --tls failed: \(up.output)")
            let tls = stack.state.appendingPathComponent("tls")
            for file in ["ca.pem", "zoo.pem", "zoo.key", "gateway.pem", "gateway.key"] {
                #expect(FileManager.default.fileExists(atPath: tls.appendingPathComponent(file).path), "\(file)")
            }
            let port = try #require(stack.basePorts["zoo"])

            // The gateway finds its certificate in compose's state, as it finds the endpoints.
            let search = try await stack.gateway(["zoo", "search", "zelva", "--json"])
            #expect(search.status == 0 && search.output.contains("Želva obrovská"), "\(search.output)")
            let status = try await stack.gateway(["status"])
            #expect(status.status == 0 && status.output.contains("SERVING"), "\(status.output)")

            // HTTP/JSON over TLS needs no client certificate, only the CA to trust the replica.
            let curl = try await Stack.run(
                "/usr/bin/curl",
                [
                    "-sS", "--cacert", tls.appendingPathComponent("ca.pem").path, "-H",
                    "Content-Type: application/json",
                    "--data", #"{"query":"zelva"}"#, "https://127.0.0.1:\(port)/menagerie.zoo.v1.Zoo/SearchAnimals",
                ], environment: stack.environment)
            #expect(curl.status == 0 && curl.output.contains("Želva obrovská"), "\(curl.output)")

            // A gateway that trusts the CA but has no certificate of its own is refused by the binary protocol.
            let anonymous = try await stack.gateway([
                "zoo", "search", "zelva", "--tls-ca", tls.appendingPathComponent("ca.pem").path,
            ])
            #expect(anonymous.status != 0 && anonymous.output.contains("certificate required"), "\(anonymous.output)")

            // A certificate of another CA is refused.
            let stranger = stack.directory.appendingPathComponent("stranger")
            let other = try TestCertificates(name: "Stranger CA", in: stranger).issue("stranger")
            let foreign = try await stack.gateway([
                "zoo", "search", "zelva", "--tls-ca", tls.appendingPathComponent("ca.pem").path,
                "--tls-cert", other.certificate, "--tls-key", other.key,
            ])
            #expect(foreign.status != 0 && foreign.output.contains("unknown ca"), "\(foreign.output)")

            // A TLS directory without the CA is reported, never a reason to call in plaintext (issue 38).
            var misplaced = stack.environment
            misplaced["MENAGERIE_TLS_DIR"] = stranger.appendingPathComponent("none").path
            let noCA = try await Stack.run(
                "\(Stack.binDirectory)/gateway", ["zoo", "search", "zelva", "--state", stack.state.path],
                environment: misplaced)
            #expect(noCA.status == 66 && noCA.output.contains("MENAGERIE_TLS_DIR"), "\(noCA.output)")
            // A plaintext gateway (no TLS anywhere it looks, the replica named by hand) is told to use TLS.
            var plain = stack.environment
            plain["MENAGERIE_STATE_DIR"] = stranger.path
            plain["MENAGERIE_TLS_DIR"] = nil
            let plaintext = try await Stack.run(
                "\(Stack.binDirectory)/gateway", ["zoo", "search", "zelva", "--endpoint", "zoo=127.0.0.1:\(port)"],
                environment: plain)
            #expect(
                plaintext.status != 0 && plaintext.output.contains("accepts TLS connections only"),
                "\(plaintext.output)")
            let log = try String(contentsOf: stack.state.appendingPathComponent("logs/zoo.0.log"), encoding: .utf8)
            #expect(log.contains("accepts TLS connections only"), "the replica logs the refused plaintext client")
            #expect(log.contains("certificate"), "the replica logs the refused certificates")

            // SIGHUP reloads the certificates and the replica keeps serving.
            let pid = try #require(try stack.servicePids()["zoo.0"])
            kill(pid, SIGHUP)
            var reloaded = false
            for _ in 0..<Int(50 * TestTime.scale) where !reloaded {
                try await Task.sleep(for: .milliseconds(100))
                reloaded =
                    (try? String(contentsOf: stack.state.appendingPathComponent("logs/zoo.0.log"), encoding: .utf8))?
                    .contains("reloaded TLS certificates: CN=zoo,O=Menagerie") == true
            }
            #expect(reloaded)
            #expect(try await stack.gateway(["zoo", "search", "zelva"]).status == 0)
        }
    }

    @Test func plaintextIsRefusedOffLoopbackUnlessInsecure() async throws {
        let refused = try await Stack.run(
            "\(Stack.binDirectory)/zoo", ["--host", "0.0.0.0", "--port", "0", "--data-dir", NSTemporaryDirectory()],
            environment: ProcessInfo.processInfo.environment)
        #expect(
            refused.status != 0 && refused.output.contains("refusing to serve plaintext on 0.0.0.0"),
            "\(refused.output)")
    }
}

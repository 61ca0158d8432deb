import Foundation
import TestSupport
import Testing

/// Classification on `compose up --nodes 3`: one dqlite cluster of its replicas for the rows, each node's disk for
/// the images and model files (DATA/node-N/blobs). A dataset uploaded and a model trained through node 1 are on a
/// second node's disk before they are acknowledged; after `node kill 1` the model is exported through node 2 (the
/// same file) and evaluated on the dataset through node 3, which fetches what its disk lacks. Needs root, `ip netns`
/// and the shared digits; skips elsewhere.
@Suite(
    .serialized, .timeLimit(.minutes(4)),
    .enabled(
        if: Nodes.available && ClassificationStackTests.enabled,
        "needs root, ip netns (iproute2) and ../shared/datasets/digits"))
struct ClassificationNodesTests {
    /// With `--tls` the replicas reach each other's Blobs rpcs over mutual TLS, each with its own certificate.
    @Test(arguments: [false, true])
    func aDatasetAndAModelOutliveTheNodeTheyWereWrittenThrough(tls: Bool) async throws {
        let network = Nodes.freeNetwork()
        defer { Nodes.removeLeftovers(tag: network.tag) }
        try await Stack.with(services: ["classification"]) { stack in
            func compose(_ arguments: String...) async throws -> (status: Int32, output: String) {
                try await stack.compose(environment: network.environment, arguments)
            }
            let port = try #require(stack.basePorts["classification"])
            func classify(_ node: Int, _ arguments: [String]) async throws -> (status: Int32, output: String) {
                let start = ContinuousClock.now
                var result: (status: Int32, output: String)
                repeat {  // UNAVAILABLE (a leader being elected) is retried, as a client would
                    result = try await stack.gateway(
                        ["classify"] + arguments + [
                            "--endpoint", "classification=\(network.subnet).\(10 + node):\(port)",
                        ])
                    if result.status == 14 { try await Task.sleep(for: .milliseconds(300)) }
                } while result.status == 14 && ContinuousClock.now - start < TestTime.scaled(.seconds(30))
                return result
            }
            func blobs(_ node: Int) -> Set<String> {
                let root = stack.directory.appendingPathComponent("data/classification/node-\(node)/blobs")
                let folders = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
                return Set(
                    folders.filter { $0.count == 2 }.flatMap {
                        (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent($0).path))
                            ?? []
                    })
            }

            let up = try await stack.compose(
                environment: network.environment, ["up", "--nodes", "3"] + (tls ? ["--tls"] : []))
            try #require(up.status == 0, "compose up --nodes 3 failed: \(up.output)")
            #expect((1...3).allSatisfy { up.output.contains("started classification.0 on node \($0)") }, "\(up.output)")
            let train = stack.directory.appendingPathComponent("files/train")
            try ClassificationStackTests.digitsSubset("train", labels: ["0", "1", "2"], count: 10, into: train)
            let created = try await classify(1, ["dataset", "create", "digits", "--from", train.path])
            try #require(created.status == 0, "\(created.output)")
            let trained = try await classify(
                1, ["train", "--dataset", "digits", "--algorithm", "features", "--name", "m"])
            try #require(trained.status == 0, "\(trained.output)")
            let before = stack.directory.appendingPathComponent("before.model")
            try #require(try await classify(1, ["model", "export", "m", "-o", before.path]).status == 0)

            let written = blobs(1)
            #expect(written.count == 31, "\(written.count) blobs on node 1 (30 images and a model)")
            for hash in written {
                #expect(blobs(2).contains(hash) || blobs(3).contains(hash), "blob \(hash) is on node 1 only")
            }

            #expect(try await compose("node", "kill", "1").status == 0)
            let killed = ContinuousClock.now
            let after = stack.directory.appendingPathComponent("after.model")
            let exported = try await classify(2, ["model", "export", "m", "-o", after.path])
            #expect(exported.status == 0, "\(exported.output)")
            #expect(try Data(contentsOf: after) == Data(contentsOf: before), "the same model file through node 2")
            let evaluated = try await classify(3, ["evaluate", "m", "digits"])
            #expect(evaluated.status == 0, "\(evaluated.output)")
            #expect(blobs(3).isSuperset(of: written), "node 3 fetched what its disk lacked and kept it")
            print(
                "classification on 3 nodes\(tls ? " (TLS)" : ""): node 1 killed; export through node 2 and evaluation through node 3 done \(ContinuousClock.now - killed) later"
            )
            #expect(try await compose("down").status == 0)
        }
    }
}

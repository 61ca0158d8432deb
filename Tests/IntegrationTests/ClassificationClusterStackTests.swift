import Foundation
import TestSupport
import Testing

/// Three classification replicas whose database is one dqlite cluster (`--cluster`) and whose images and model files
/// are kept by content hash on their disks (`--blob-peers`), driven through the gateway: a dataset uploaded and a
/// model trained through one replica are on two replicas' disks before they are acknowledged; after `kill -9` of
/// that replica (also the cluster's first leader) the others export the model and evaluate it on the dataset,
/// fetching what their disk lacks from the surviving copy, and their repair (every second here) puts each blob on both
/// of them again.
@Suite(.serialized) struct ClassificationClusterStackTests {
    @Test(.enabled(if: ClassificationStackTests.enabled, ClassificationStackTests.skipMessage))
    func payloadsAreOnTwoNodesAndSurviveTheirWritersKill() async throws {
        let replicas = try ClusterReplicas("classification", command: "classify") { servicePorts in
            // Every replica's, its own included (left out by each), as compose gives it.
            [
                "--blob-peers", servicePorts.map { "127.0.0.1:\($0)" }.joined(separator: ","), "--blob-repair-interval",
                "1",
            ]
        }
        for port in replicas.servicePorts { try await Stack.waitServing(port: port) }
        let train = replicas.directory.appendingPathComponent("files/train")
        try ClassificationStackTests.digitsSubset("train", labels: ["0", "1", "2"], count: 10, into: train)

        let created = try await replicas.gateway(0, ["dataset", "create", "digits", "--from", train.path])
        try #require(created.status == 0, "\(created.output)")
        let trained = try await replicas.gateway(
            0, ["train", "--dataset", "digits", "--algorithm", "features", "--name", "m"])
        try #require(trained.status == 0, "\(trained.output)")
        let before = replicas.directory.appendingPathComponent("before.model")
        let exported = try await replicas.gateway(0, ["model", "export", "m", "-o", before.path])
        try #require(exported.status == 0, "\(exported.output)")

        // 30 images and a model: each on replica 0's disk and on another's, acknowledged only then.
        let written = replicas.blobs(0)
        #expect(written.count == 31, "\(written.count) blobs on replica 0")
        for hash in written {
            #expect(
                replicas.blobs(1).contains(hash) || replicas.blobs(2).contains(hash),
                "blob \(hash) is on replica 0 only")
        }

        replicas.kill9(0)
        let after = replicas.directory.appendingPathComponent("after.model")
        let again = try await replicas.gatewayRetrying(1, ["model", "export", "m", "-o", after.path])
        #expect(again.status == 0, "\(again.output)")
        #expect(
            try Data(contentsOf: after) == Data(contentsOf: before),
            "the model exported through another replica is the same file")
        let evaluated = try await replicas.gatewayRetrying(2, ["evaluate", "m", "digits"])
        #expect(evaluated.status == 0, "\(evaluated.output)")
        #expect(replicas.blobs(2).isSuperset(of: written), "replica 2 fetched what it lacked and kept it")
        // Replica 0's copies are lost with it: the survivors' repair puts every blob on both of them.
        let lost = ContinuousClock.now
        while !(replicas.blobs(1).isSuperset(of: written) && replicas.blobs(2).isSuperset(of: written)),
            ContinuousClock.now - lost < TestTime.scaled(.seconds(20))
        {
            try await Task.sleep(for: .milliseconds(250))
        }
        #expect(
            replicas.blobs(1).isSuperset(of: written) && replicas.blobs(2).isSuperset(of: written),
            "the repair made two copies again")
    }
}

extension ClusterReplicas {
    /// The hashes of the blobs on a replica's disk.
    fileprivate func blobs(_ replica: Int) -> Set<String> {
        let root = dataDirectory(replica).appendingPathComponent("blobs")
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        return Set(
            folders.filter { $0.count == 2 }.flatMap {
                (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent($0).path)) ?? []
            })
    }
}

import ServiceKit
import Testing
import Transport

/// The flags every service executable takes, and the limits they become.
@Suite struct ServiceOptionsTests {
    @Test func flagsBecomeTheServersLimits() throws {
        let options = try ServiceOptions.parse([
            "--port", "7100", "--max-frame-size", "2048", "--max-connections", "8", "--workers", "3",
            "--idle-timeout", "1.5", "--frame-timeout", "0.25", "--max-connections-per-peer", "4",
            "--max-concurrent-calls", "7", "--memory-budget", "64",
        ])
        #expect(options.port == 7100)
        let limits = options.limits
        #expect(limits.maxFrameSize == 2048)
        #expect(limits.maxConnections == 8)
        #expect(limits.workers == 3)
        #expect(limits.idleTimeout == .milliseconds(1500))
        #expect(limits.frameTimeout == .milliseconds(250))
        #expect(limits.maxConnectionsPerPeer == 4)
        #expect(limits.maxConcurrentCalls == 7)
        #expect(limits.memoryBudget == 64 << 20)
    }

    @Test func defaultsAreGRPCLike() throws {
        let limits = try ServiceOptions.parse([]).limits
        #expect(limits.maxConcurrentCalls == 100)
        #expect(limits.maxConnectionsPerPeer == 256)
        #expect(limits.memoryBudget == 256 << 20)
    }

    @Test(arguments: [
        ["--port", "70000"], ["--workers", "0"], ["--workers", "5000"], ["--max-frame-size", "10"],
        ["--max-connections", "0"], ["--idle-timeout", "-1"], ["--frame-timeout", "nan"], ["--shutdown-grace", "0"],
        ["--log-level", "loud"], ["--database", ""], ["--max-concurrent-calls", "0"], ["--memory-budget", "0"],
        ["--max-connections-per-peer", "0"],
    ])
    func badFlagsAreRefused(arguments: [String]) {
        #expect(throws: (any Error).self) { try ServiceOptions.parse(arguments) }
    }

    @Test func clusterFlagsNameThisReplicasNodeAmongTheList() throws {
        let options = try ServiceOptions.parse([
            "--cluster", "10.0.0.1:9001, 10.0.0.2:9001", "--cluster-bind", "10.0.0.2:9001",
        ])
        #expect(options.clusterAddresses == ["10.0.0.1:9001", "10.0.0.2:9001"])
        #expect(try ServiceOptions.parse([]).clusterAddresses == nil)
        // A node keeps its id while the list changes (compose node add and remove).
        let named = try ServiceOptions.parse([
            "--cluster", "10.0.0.2:9001,10.0.0.4:9001", "--cluster-bind", "10.0.0.4:9001", "--cluster-id", "4",
        ])
        #expect(named.clusterID == 4)
        // In a container: named by its DNS name, listening on every address.
        let pod = try ServiceOptions.parse([
            "--cluster", "health-0.health-cluster:8300,health-1.health-cluster:8300", "--cluster-bind",
            "health-1.health-cluster:8300",
            "--cluster-listen", "0.0.0.0:8300",
        ])
        #expect(pod.clusterListen == "0.0.0.0:8300")
        let refused: [[String]] = [
            // no port
            ["--cluster", "10.0.0.1:9001", "--cluster-bind", "10.0.0.1:9001", "--cluster-listen", "0.0.0.0"],
            ["--cluster", "10.0.0.1:9001", "--cluster-bind", "10.0.0.1:9001", "--cluster-listen", "0.0.0.0:70000"],
            ["--cluster-listen", "0.0.0.0:9001"],  // without --cluster
            ["--cluster", "10.0.0.1:9001"],  // which node is this one?
            ["--cluster", "10.0.0.1:9001", "--cluster-bind", "10.0.0.3:9001"],  // not in the list
            ["--cluster", "10.0.0.1", "--cluster-bind", "10.0.0.1"],  // no port
            ["--cluster", "10.0.0.1:9001,10.0.0.1:9001", "--cluster-bind", "10.0.0.1:9001"],  // twice
            ["--cluster-bind", "10.0.0.1:9001"], ["--cluster-dir", "/tmp/x"],  // without --cluster
            ["--cluster", "10.0.0.1:9001", "--cluster-bind", "10.0.0.1:9001", "--database", "x.sqlite"],
            ["--cluster", "10.0.0.1:9001", "--cluster-bind", "10.0.0.1:9001", "--cluster-latency", "0"],
            ["--cluster-latency", "50"],
            ["--cluster", "10.0.0.1:9001", "--cluster-bind", "10.0.0.1:9001", "--cluster-id", "0"],
            ["--cluster-id", "2"],
        ]
        for arguments in refused {
            #expect(throws: (any Error).self, "\(arguments)") { try ServiceOptions.parse(arguments) }
        }
    }

    @Test func plaintextIsRefusedOffLoopbackUnlessInsecure() throws {
        let error = #expect(throws: (any Error).self) { try ServiceOptions.parse(["--host", "0.0.0.0"]) }
        #expect("\(String(describing: error))".contains("refusing to serve plaintext on 0.0.0.0"))
        #expect(try ServiceOptions.parse(["--host", "0.0.0.0", "--insecure"]).insecure)
        for host in ["127.0.0.1", "127.0.0.2", "::1", "localhost"] { _ = try ServiceOptions.parse(["--host", host]) }
        // TLS on any address; its three files go together.
        let tls = try ServiceOptions.parse([
            "--host", "0.0.0.0", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem",
        ])
        #expect(tls.tlsCertificate == "c.pem")
        #expect(throws: (any Error).self) { try ServiceOptions.parse(["--tls-cert", "c.pem", "--tls-key", "k.pem"]) }
    }
}

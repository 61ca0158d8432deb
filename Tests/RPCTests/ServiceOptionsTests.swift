import ServiceKit
import Testing
import Transport

/// The flags every service executable takes, and the limits they become.
@Suite struct ServiceOptionsTests {
    @Test func flagsBecomeTheServersLimits() throws {
        let options = try ServiceOptions.parse([
            "--port", "7100", "--max-frame-size", "2048", "--max-connections", "8", "--workers", "3",
            "--idle-timeout", "1.5", "--frame-timeout", "0.25",
        ])
        #expect(options.port == 7100)
        let limits = options.limits
        #expect(limits.maxFrameSize == 2048)
        #expect(limits.maxConnections == 8)
        #expect(limits.workers == 3)
        #expect(limits.idleTimeout == .milliseconds(1500))
        #expect(limits.frameTimeout == .milliseconds(250))
    }

    @Test(arguments: [
        ["--port", "70000"], ["--workers", "0"], ["--workers", "5000"], ["--max-frame-size", "10"],
        ["--max-connections", "0"], ["--idle-timeout", "-1"], ["--frame-timeout", "nan"], ["--shutdown-grace", "0"],
        ["--log-level", "loud"],
    ])
    func badFlagsAreRefused(arguments: [String]) {
        #expect(throws: (any Error).self) { try ServiceOptions.parse(arguments) }
    }
}

import Foundation
import Testing

/// Where the gateway's tokens may go, seen from a listener of the attacker's: the stack's admin token (compose's
/// state) reaches only the stack's own endpoints, and no token leaves on plaintext for an address that is neither
/// loopback nor the stack's. The gateway runs as the operator beside a stack: a state directory holding the
/// admin token and the stack's endpoints, no token in its environment.
@Suite(.serialized) struct TokenConfinementTests {
    let state: URL
    let adminToken = "mnt_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()

    init() throws {
        state = try Stack.scratchDirectory("menagerie-token-state")
        try (adminToken + "\n").write(
            to: state.appendingPathComponent("admin-token"), atomically: true, encoding: .utf8)
    }

    /// Writes the stack's endpoints file: `SERVICE ADDRESS` lines.
    func stackEndpoints(_ lines: [String]) throws {
        try (lines.joined(separator: "\n") + "\n").write(
            to: state.appendingPathComponent("endpoints"), atomically: true, encoding: .utf8)
    }

    /// The gateway with the state directory and `environment` (no admin token of the tests').
    func gateway(_ arguments: [String], environment: [String: String] = [:]) async throws -> (
        status: Int32, output: String
    ) {
        var base = ProcessInfo.processInfo.environment
        base.removeValue(forKey: "MENAGERIE_ENDPOINTS")
        base.removeValue(forKey: "MENAGERIE_TOKEN")
        base.removeValue(forKey: "MENAGERIE_TLS_DIR")
        base["MENAGERIE_ADMIN_TOKEN"] = ""
        return try await Stack.run(
            "\(Stack.binDirectory)/gateway", arguments + ["--state", state.path, "--timeout", "2"],
            environment: base.merging(environment) { $1 })
    }

    /// What a listener on a free loopback port received while `arguments` (given the listener's address) ran.
    func captured(_ arguments: (String) -> [String], environment: [String: String] = [:], listed: Bool = false)
        async throws -> String
    {
        let listener = try CapturingListener()
        defer { listener.close() }
        let address = "127.0.0.1:\(listener.port)"
        try stackEndpoints(
            ["zoo 127.0.0.1:1", "ocr 127.0.0.1:2"] + (listed ? ["ocr \(address)", "zoo \(address)"] : []))
        _ = try await gateway(arguments(address), environment: environment)
        return listener.received()
    }

    @Test func aForeignEndpointNeverGetsTheStacksAdminToken() async throws {
        defer { try? FileManager.default.removeItem(at: state) }
        // A method needing a token (every OCR call) and one needing none, named by flag or by MENAGERIE_ENDPOINTS.
        let byFlag = try await captured { ["ocr", "template", "list", "--endpoint", "ocr=\($0)"] }
        let viaEnvironment = try await capturedViaEnvironment()
        let publicCall = try await captured { ["zoo", "search", "lev", "--endpoint", "zoo=\($0)"] }
        #expect(!byFlag.isEmpty && !viaEnvironment.isEmpty && !publicCall.isEmpty, "the gateway called the listener")
        #expect(!byFlag.contains(adminToken), "the admin token went to an --endpoint that is not the stack's")
        #expect(
            !viaEnvironment.contains(adminToken),
            "the admin token went to a MENAGERIE_ENDPOINTS address that is not the stack's")
        #expect(!publicCall.contains(adminToken))
        #expect(!byFlag.contains("authorization"))
        // The same listener, when it is one of the stack's endpoints, is where the admin token goes: the check above can fail.
        let listed = try await captured({ ["ocr", "template", "list", "--endpoint", "ocr=\($0)"] }, listed: true)
        #expect(listed.contains(adminToken), "the stack's own endpoint gets the stack's admin token")
    }

    func capturedViaEnvironment() async throws -> String {
        let listener = try CapturingListener()
        defer { listener.close() }
        try stackEndpoints(["ocr 127.0.0.1:2"])
        _ = try await gateway(
            ["ocr", "template", "list"], environment: ["MENAGERIE_ENDPOINTS": "ocr=127.0.0.1:\(listener.port)"])
        return listener.received()
    }

    @Test func noTokenLeavesOnPlaintextForAnAddressNeitherLoopbackNorTheStacks() async throws {
        defer { try? FileManager.default.removeItem(at: state) }
        try stackEndpoints(["ocr 127.0.0.1:2"])
        // 192.0.2.1 is TEST-NET-1: nothing answers there, and the refusal comes before any connection.
        let foreign = "192.0.2.1:7200"
        for (arguments, environment) in [
            (["ocr", "template", "list", "--endpoint", "ocr=\(foreign)"], ["MENAGERIE_TOKEN": "mnt_user"]),
            (["ocr", "template", "list", "--endpoint", "ocr=\(foreign)"], ["MENAGERIE_ADMIN_TOKEN": "mnt_admin"]),
            (["health", "list", "stepCount", "--token", "mnt_user", "--endpoint", "health=\(foreign)"], [:]),
            (
                ["health", "list", "stepCount", "--endpoint", "health=\(foreign)"],
                ["MENAGERIE_HEALTH_TOKEN": "mnt_user"]
            ),
        ] {
            let run = try await gateway(arguments, environment: environment)
            #expect(run.status == 9, "\(arguments) \(environment): \(run.output)")
            #expect(
                run.output.contains("FAILED_PRECONDITION") && run.output.contains("plaintext")
                    && run.output.contains("TLS"), "\(run.output)")
        }
        // A method needing no token still goes there.
        let search = try await gateway(
            ["zoo", "search", "lev", "--endpoint", "zoo=\(foreign)"], environment: ["MENAGERIE_TOKEN": "mnt_user"])
        #expect(!search.output.contains("plaintext"), "\(search.output)")
    }

    @Test func anEmptyTokenIsAUsageErrorEverywhere() async throws {
        defer { try? FileManager.default.removeItem(at: state) }
        try stackEndpoints(["health 127.0.0.1:2"])
        for arguments in [["health", "list", "stepCount", "--token", ""], ["health", "login", ""]] {
            let run = try await gateway(arguments)
            #expect(run.status == 64 && run.output.contains("empty"), "\(arguments): \(run.output)")
        }
    }
}

/// A TCP listener on a free loopback port that accepts every connection and keeps what it is sent, never answering.
private final class CapturingListener: @unchecked Sendable {
    let port: Int
    private let descriptor: Int32
    private let bytes = NSLock()
    private var data: [UInt8] = []
    private var open = true

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 16) == 0 else {
            Glibc.close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        var local = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: local.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    private func acceptLoop() {
        while true {
            let connection = accept(descriptor, nil, nil)
            guard connection >= 0 else { return }
            Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                    guard count > 0 else { break }
                    bytes.lock()
                    data += buffer[..<count]
                    bytes.unlock()
                }
                Glibc.close(connection)
            }.start()
        }
    }

    /// Everything received so far, as text (the header values a call carries are readable in it).
    func received() -> String {
        bytes.lock()
        defer { bytes.unlock() }
        return String(decoding: data, as: UTF8.self)
    }

    func close() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        Glibc.close(descriptor)
    }
}

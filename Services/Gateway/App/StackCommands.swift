import ArgumentParser
import Foundation
import GatewayKit
import RPC
import RPCWire
import Schema
import Transport

// The stack-wide commands: they talk to any service through the built-in health, reflection and stats services.

/// `gateway status`: every instance of every service with its health and uptime.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every running instance of every service with its address, health and uptime.",
        discussion: """
            Exits 0 when every instance is SERVING, 1 otherwise. --json prints a JSON array with one object per \
            instance: {"service", "address", "health": "SERVING" (or NOT_SERVING, UNKNOWN, UNREACHABLE)} and the \
            fields of its HealthCheckResponse as protobuf's JSON mapping spells them ({"status": \
            "SERVING_STATUS_SERVING", "serverName", "pid", "uptimeSeconds", "version"}; pid a string, as every \
            64-bit integer), or "error" for an instance that did not answer.
            """)

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures(json: global.json) {
            let endpoints = try global.resolveEndpoints()
            var instances: [Instance] = []
            for service in endpoints.services() {
                for address in endpoints.byService[service] ?? [] {
                    instances.append(
                        await Instance.check(
                            service: service, address: address, timeout: global.timeout, tls: endpoints.tls))
                }
            }
            if global.json {
                printJSON(.array(instances.map(\.json)))
            } else if instances.isEmpty {
                print("no instances known: start the stack with compose/compose up")
            } else {
                printTable(
                    ["SERVICE", "ADDRESS", "HEALTH", "PID", "UPTIME"],
                    instances.map {
                        [
                            $0.service, $0.address, $0.health, $0.pid.map(String.init) ?? "-",
                            $0.uptime.map { formatDuration(seconds: $0) } ?? "-",
                        ]
                    })
            }
            if instances.isEmpty || instances.contains(where: { $0.health != "SERVING" }) {
                throw GatewayExit.checkFailed
            }
        }
    }
}

/// One instance's answer to a health check.
struct Instance {
    var service: String
    var address: String
    var health: String
    var detail: String?
    /// The instance's answer, nil when it did not answer.
    var reply: RpcV1.HealthCheckResponse?

    var pid: Int64? { reply?.pid }
    var uptime: Double? { reply?.uptimeSeconds }

    static func check(service: String, address: String, timeout: Double, tls: TLSCredentials?) async -> Instance {
        do {
            let client = RPCClient(
                transports: [try TCPClientTransport(endpoint: address, tls: tls)], retry: .init(maxAttempts: 1))
            defer { client.close() }
            let reply = try await RpcV1.Health.Client(wrapping: client).check(
                RpcV1.HealthCheckRequest(), options: CallOptions(timeout: .milliseconds(Int64(timeout * 1000))))
            let health = reply.status == .serving ? "SERVING" : reply.status == .notServing ? "NOT_SERVING" : "UNKNOWN"
            return Instance(service: service, address: address, health: health, reply: reply)
        } catch {
            return Instance(service: service, address: address, health: "UNREACHABLE", detail: "\(error)")
        }
    }

    /// What `status --json` prints of the instance: which one it is and the gateway's verdict (`health`, which also
    /// names an instance that did not answer), then its answer's fields as the JSON mapping spells them, or the
    /// error of an instance that did not answer.
    var json: JSONValue {
        var members = [
            JSONMember("service", .string(service)), JSONMember("address", .string(address)),
            JSONMember("health", .string(health)),
        ]
        members += reply?.outputJSON.objectValue ?? []
        if let detail { members.append(JSONMember("error", .string(detail))) }
        return .object(members)
    }
}

/// `gateway probe HOST:PORT`: exits 0 when that one instance answers SERVING (used by compose).
struct Probe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check one instance's health; exit 0 only when it is SERVING.")

    @Argument(help: "HOST:PORT of the instance.")
    var address: String

    @Option(parsing: .unconditional, help: "Seconds to wait for the answer.")
    var timeout = 2.0

    @Flag(help: "Print nothing.")
    var quiet = false

    @Option(
        name: .customLong("state"),
        help:
            "The compose state directory, where compose up --tls keeps the gateway's certificate (default: $MENAGERIE_STATE_DIR, else compose/.state)."
    )
    var stateDirectory: String?

    @OptionGroup var tls: ClientTLSOptions

    @Option(
        parsing: .unconditional,
        help:
            "Also require the answer to come from the process with this id (another program may hold the port; default: any process)."
    )
    var pid: Int64?

    func validate() throws { try validateTimeout(timeout) }

    func run() async throws {
        var instance: Instance
        do {
            instance = await Instance.check(
                service: "", address: address, timeout: timeout,
                tls: try tls.credentials(stateDirectory: stateDirectory))
        } catch {
            instance = Instance(service: "", address: address, health: "UNREACHABLE", detail: "\(error)")
        }
        // The answering pid is read into a constant first: Swift 6.3.1's optimizer crashed ("found outside of lifetime
        // use") compiling `instance.pid` here, inside the mutation of `instance`, in release builds.
        let answering: Int64? = instance.reply.map(\.pid)
        if let pid, instance.health == "SERVING", answering != pid {
            instance.health = "OTHER_PROCESS"
            instance.detail = "pid \(answering.map(String.init) ?? "unknown") answers, not \(pid)"
        }
        if !quiet { print("\(address) \(instance.health)" + (instance.detail.map { ": \($0)" } ?? "")) }
        if instance.health != "SERVING" { throw GatewayExit.checkFailed }
    }
}

/// `gateway methods SERVICE`: what reflection reports.
struct Methods: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the services and methods an instance of SERVICE offers (reflection).",
        discussion: """
            --json prints the ListServicesResponse: {"services": [{"name", "methods": [{"path", "serverStreaming", \
            "requestType", "responseType", "idempotent", "clientStreaming"}]}]}.
            """)

    @Argument(help: "A service named in compose/services.conf, e.g. zoo.")
    var service: String

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures(json: global.json) {
            let client = try global.resolveEndpoints().client(for: service)
            defer { client.close() }
            let reply = try await RpcV1.Reflection.Client(wrapping: client).listServices(
                RpcV1.ListServicesRequest(), options: global.callOptions)
            let methods = reply.services.flatMap(\.methods)
            try global.render(
                reply,
                text: {
                    printTable(
                        ["METHOD", "KIND", "REQUEST", "RESPONSE"],
                        methods.map { [$0.path, Self.kind($0), $0.requestType, $0.responseType] })
                })
        }
    }

    /// The call kind as gRPC names it.
    static func kind(_ method: RpcV1.MethodInfo) -> String {
        switch (method.clientStreaming, method.serverStreaming) {
        case (false, false): "unary"
        case (false, true): "server-streaming"
        case (true, false): "client-streaming"
        case (true, true): "bidirectional-streaming"
        }
    }
}

/// `gateway stats SERVICE`: per-method figures of each instance.
struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Per-method call counts, errors and latency of every instance of SERVICE, how long its event loop's turns ran, and its memory budget's use.",
        discussion: """
            --json prints a JSON array with one object per instance: {"address"} and the fields of its GetStatsResponse \
            as protobuf's JSON mapping spells them ({"methods": [{"path", "calls", "errors", "latencyP50Ms", \
            "latencyP99Ms", "byStatus": [{"code", "calls"}], "kept"}], "openConnections", …, "loop": {"turns", "busySeconds", …}, \
            "memory": {"limitBytes", "usedBytes", "refused"}}; \
            64-bit counts as strings).
            """)

    @Argument(help: "A service named in compose/services.conf, e.g. zoo.")
    var service: String

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures(json: global.json) {
            let endpoints = try global.resolveEndpoints()
            var rows: [[String]] = [], loopRows: [[String]] = [], memoryRows: [[String]] = []
            var replies: [JSONValue] = []
            for transport in try endpoints.client(for: service).transports {
                let client = RPCClient(transports: [transport], retry: .init(maxAttempts: 1))
                defer { client.close() }
                let reply = try await RpcV1.Stats.Client(wrapping: client).getStats(
                    RpcV1.GetStatsRequest(), options: global.callOptions)
                replies.append(
                    .object([JSONMember("address", .string(transport.endpoint))] + (reply.outputJSON.objectValue ?? []))
                )
                for method in reply.methods {
                    let byStatus = method.byStatus.map { (StatusCode(rawValue: $0.code).name, $0.calls) }
                    rows.append([
                        transport.endpoint, method.path, "\(method.calls)", "\(method.errors)",
                        "\(method.kept)", String(format: "%.3f", method.latencyP50Ms),
                        String(format: "%.3f", method.latencyP99Ms),
                        byStatus.filter { $0.0 != "OK" }.map { "\($0.0)=\($0.1)" }.joined(separator: " "),
                    ])
                }
                if let loop = reply.loop {
                    loopRows.append([
                        transport.endpoint, "\(loop.turns)", String(format: "%.3f", loop.busySeconds),
                        String(format: "%.3f", loop.longestTurnMs), "\(loop.turnsOver1ms)", "\(loop.turnsOver10ms)",
                        "\(loop.turnsOver100ms)",
                    ])
                }
                if let memory = reply.memory {
                    memoryRows.append([
                        transport.endpoint, Self.mebibytes(memory.usedBytes), Self.mebibytes(memory.limitBytes),
                        String(
                            format: "%.1f",
                            memory.limitBytes == 0 ? 0 : 100 * Double(memory.usedBytes) / Double(memory.limitBytes)),
                        "\(memory.refused)",
                    ])
                }
            }
            try global.render(
                jsonValue: { .array(replies) },
                text: {
                    // KEPT: of CALLS, those answered from the answer cache without their handler.
                    printTable(
                        ["ADDRESS", "METHOD", "CALLS", "ERRORS", "KEPT", "P50 MS", "P99 MS", "ERRORS BY STATUS"], rows)
                    // A long turn of the event loop delays every connection of that instance at once.
                    print("")
                    printTable(
                        ["ADDRESS", "LOOP TURNS", "BUSY S", "LONGEST MS", "OVER 1 MS", "OVER 10 MS", "OVER 100 MS"],
                        loopRows)
                    // What clients' data (frames arriving, unread answers, uploads, queued batches) holds of the budget.
                    print("")
                    printTable(["ADDRESS", "MEMORY USED MIB", "BUDGET MIB", "USED %", "REFUSED"], memoryRows)
                })
        }
    }

    static func mebibytes(_ bytes: UInt64) -> String { String(format: "%.1f", Double(bytes) / 1_048_576) }
}

import Base
import Foundation
import RPCWire
import Schema
import Synchronization

/// What the built-in services report about the server they run in.
final class ServerState: Sendable {
    let name: String
    let stats = ServerStats()
    let startedAt = ContinuousClock.now
    let serving = Atomic<Bool>(true)
    private let methodList = Mutex<[ProtoMethodInfo]>([])

    init(name: String) { self.name = name }

    var methods: [ProtoMethodInfo] {
        get { methodList.withLock { $0 } }
        set { methodList.withLock { $0 = newValue } }
    }

    var uptimeSeconds: Double {
        (ContinuousClock.now - startedAt).seconds
    }
}

/// Health (like grpc.health.v1), reflection and stats: served by every server.
struct BuiltinServices: RPCService {
    let state: ServerState

    func register(in router: inout RPCRouter) {
        let state = state
        router.unary(RpcV1.Health.check) { request, _ in
            let known = request.service.isEmpty || state.methods.contains { $0.service == request.service }
            guard known else { throw RPCError(.notFound, "this server offers no service named \(request.service)") }
            return RpcV1.HealthCheckResponse(
                status: state.serving.load(ordering: .acquiring) ? .serving : .notServing,
                serverName: state.name, pid: Int64(ProcessInfo.processInfo.processIdentifier),
                uptimeSeconds: state.uptimeSeconds, version: menagerieVersion)
        }
        router.unary(RpcV1.Reflection.listServices) { _, _ in
            let byService = Dictionary(grouping: state.methods, by: \.service)
            return RpcV1.ListServicesResponse(
                services: byService.keys.sorted().map { name in
                    RpcV1.ServiceInfo(
                        name: name,
                        methods: byService[name, default: []].map { method in
                            RpcV1.MethodInfo(
                                path: method.path, serverStreaming: method.serverStreaming,
                                requestType: method.requestType, responseType: method.responseType,
                                idempotent: method.idempotent, clientStreaming: method.clientStreaming)
                        })
                })
        }
        router.unary(RpcV1.Stats.getStats) { _, _ in
            let connections = state.stats.connectionFigures
            return RpcV1.GetStatsResponse(
                methods: state.stats.snapshot().map { figures in
                    RpcV1.MethodStats(
                        path: figures.path, calls: figures.calls, errors: figures.errors,
                        latencyP50Ms: figures.p50Milliseconds, latencyP99Ms: figures.p99Milliseconds,
                        byStatus: figures.byStatus.enumerated().filter { $0.element > 0 }.map {
                            RpcV1.StatusCount(code: UInt32($0.offset), calls: $0.element)
                        }, kept: figures.kept)
                },
                openConnections: connections.open, totalConnections: connections.total,
                rejectedConnections: connections.rejected, uptimeSeconds: state.uptimeSeconds,
                loop: state.stats.loopFigures.map { loop in
                    RpcV1.LoopStats(
                        turns: loop.turns, busySeconds: loop.busySeconds, longestTurnMs: loop.longestMilliseconds,
                        turnsOver1ms: loop.turnsOver[0], turnsOver10ms: loop.turnsOver[1],
                        turnsOver100ms: loop.turnsOver[2])
                },
                memory: RpcV1.MemoryStats(
                    limitBytes: UInt64(MemoryBudget.process.limit),
                    usedBytes: UInt64(max(0, MemoryBudget.process.used)),
                    refused: UInt64(MemoryBudget.process.refused)))
        }
    }
}

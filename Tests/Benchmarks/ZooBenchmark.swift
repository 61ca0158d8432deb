import Foundation
import RPC
import Schema
import Synchronization
import Transport
import ZooAPI
import ZooCore
import ZooService

/// Search, detail and route calls through the client library (RPCClient over loopback TCP) to a zoo service
/// loaded with the real data (`<package root>/../shared/datasets/zoo`; the sample data when it is missing).
struct ZooBenchmark {
    let secondsPerRun: Double

    static let realData = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/datasets/zoo")

    func run() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("zoo-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let library = try ZooLibrary(path: scratch.appendingPathComponent("zoo.sqlite").path)
        let directory =
            FileManager.default.fileExists(atPath: Self.realData.path)
            ? Self.realData : ZooDataSet.bundledSampleDirectory
        try library.importFiles(ZooSourceFile.directory(directory), source: directory.path, trigger: .client)
        let server = try TCPServer(
            rpc: RPCServer(name: "zoo-bench", services: [ZooService(library: library)]), port: 0, limits: benchLimits)
        let client = RPCClient(transports: [try TCPClientTransport(endpoint: server.address)])
        let workload = try Workload(library.snapshot())
        print(
            "Zoo benchmark: \(workload.animalIDs.count) animals from \(directory.path), \(secondsPerRun)s per run, "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(serverLoops) server loop(s), RPCClient over loopback TCP"
        )

        let duration = Duration.milliseconds(Int64(secondsPerRun * 1000))
        let next = Counter()
        let calls: [(String, @Sendable () async throws -> Void)] = [
            (
                "search",
                {
                    _ = try await client.unary(
                        ZooV1.Zoo.searchAnimals, workload.searches[next.take() % workload.searches.count])
                }
            ),
            (
                "detail",
                {
                    let id = workload.animalIDs[next.take() % workload.animalIDs.count]
                    _ = try await client.unary(
                        ZooV1.Zoo.getAnimal, ZooV1.GetAnimalRequest(id: Int64(id), includeUnavailable: true))
                }
            ),
            (
                "route",
                {
                    _ = try await client.unary(ZooV1.Zoo.route, workload.routes[next.take() % workload.routes.count])
                }
            ),
        ]
        var rows: [[String]] = []
        var verdicts: [String] = []
        for (name, call) in calls {
            for callers in [1, 16] {
                let measurement = try await Measurement.run(callers: callers, duration: duration, call)
                let p99 = measurement.percentileMilliseconds(0.99)
                rows.append([
                    name, "\(callers)", String(format: "%.0f", measurement.callsPerSecond),
                    String(format: "%.3f", measurement.percentileMilliseconds(0.5)), String(format: "%.3f", p99),
                ])
                if callers == 16 && name != "detail" {
                    verdicts.append(
                        "goal \(name) p99 < 2 ms at 16 callers: \(String(format: "%.3f", p99)) ms \(p99 < 2 ? "met" : "NOT met")"
                    )
                }
            }
        }
        printTable(["call", "callers", "calls/s", "p50 ms", "p99 ms"], rows)
        for verdict in verdicts { print(verdict) }
        client.close()
        await server.shutdown(grace: .seconds(1))
    }

    /// The requests the callers cycle through.
    struct Workload: Sendable {
        var searches: [ZooV1.SearchAnimalsRequest]
        var animalIDs: [Int]
        /// From a point near one map location to an animal, only pairs the footpaths connect.
        var routes: [ZooV1.RouteRequest]

        init(_ zoo: ZooSnapshot) throws {
            let texts = [
                "zelva", "lev", "panda", "tygr", "sav", "a", "zirafa", "orel", "ryba", "opice", "xyz", "krajta",
            ]
            searches =
                texts.map { ZooV1.SearchAnimalsRequest(text: $0) }
                + [
                    ZooV1.SearchAnimalsRequest(classes: ["Savci"], continents: ["Afrika"]),
                    ZooV1.SearchAnimalsRequest(text: "a", foods: ["ryby"]),
                ]
            animalIDs = zoo.catalogue.animals.map(\.id)
            let starts = zoo.catalogue.features.values.map(\.anchor).filter(Geo.isValid).sorted {
                ($0.lat, $0.lon) < ($1.lat, $1.lon)
            }
            let targets = zoo.catalogue.animals.filter { !$0.mapFeatureIDs.isEmpty }.map(\.id)
            var routes: [ZooV1.RouteRequest] = []
            for (index, start) in starts.enumerated() {
                for target in targets.dropFirst(index % 7).striding(by: 23) {
                    let point = GeoPoint(lat: start.lat + 0.0001, lon: start.lon - 0.0001)
                    guard (try? zoo.route(from: .point(point), to: .animal(id: target))) != nil else { continue }
                    routes.append(
                        ZooV1.RouteRequest(
                            from: ZooV1.Place(point: ZooV1.GeoPoint(lat: point.lat, lon: point.lon)),
                            to: ZooV1.Place(animalID: Int64(target))))
                }
            }
            guard !routes.isEmpty else { throw RPCError(.failedPrecondition, "no connected routes in the data") }
            self.routes = routes
        }
    }
}

/// A shared round-robin position.
private final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    func take() -> Int { value.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max }
}

extension Collection {
    /// Every `step`-th element, starting with the first.
    fileprivate func striding(by step: Int) -> [Element] {
        enumerated().filter { $0.offset % step == 0 }.map(\.element)
    }
}

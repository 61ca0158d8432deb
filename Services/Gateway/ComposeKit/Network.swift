import Foundation
import GatewayKit

/// The nodes of `compose up --nodes N`, as STATE/network records them: N "machines" on this one, each a network
/// namespace (TAG-nodeN) whose link (TAG-vN) joins a bridge (TAG-br) on a private /24 where the host is SUBNET.1
/// and node N is SUBNET.(10+N). Nodes taken out by `node remove` keep their numbers.
public struct Network: Sendable, Equatable {
    /// A clustered replica's member listens on its port + this.
    public static let clusterPortOffset = 1000

    public let tag: String
    public let subnet: String
    public let count: Int
    public let removed: [Int]
    /// The services `up` started on the nodes, in compose's order (nil: a state that predates the list, every service).
    public let services: [String]?

    public init(tag: String, subnet: String, count: Int, removed: [Int] = [], services: [String]? = nil) {
        self.tag = tag
        self.subnet = subnet
        self.count = count
        self.removed = removed
        self.services = services
    }

    /// STATE/network's `key=value` lines; what is missing or unreadable takes the defaults (mn, 10.231.0, no nodes).
    public static func parse(_ text: String) -> Network {
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            fields[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return Network(
            tag: fields["tag"] ?? "mn", subnet: fields["subnet"] ?? "10.231.0", count: Int(fields["nodes"] ?? "") ?? 0,
            removed: (fields["removed"] ?? "").split(separator: ",").compactMap { Int($0) },
            services: fields["services"].map { $0.split(separator: " ").map(String.init) })
    }

    /// The nodes that are part of the stack (removed ones left out).
    public var numbers: [Int] { count > 0 ? (1...count).filter { !removed.contains($0) } : [] }

    public func address(_ node: Int) -> String { "\(subnet).\(10 + node)" }
    public func namespace(_ node: Int) -> String { "\(tag)-node\(node)" }
    public func link(_ node: Int) -> String { "\(tag)-v\(node)" }
    public var bridge: String { "\(tag)-br" }
}

/// Where a service's replicas go on the nodes, and which of them form a cluster.
extension ServiceSettings {
    /// Whether it runs on `node`: its `nodes` list names it, or it has none.
    public func isPlaced(on node: Int) -> Bool { nodes.isEmpty || nodes.contains(node) }

    /// Whether its replicas on `nodes` nodes form a dqlite cluster: it says `cluster = yes` and is placed on more than
    /// one of them.
    public func clusters(onNodes nodes: Int?) -> Bool {
        guard cluster, let nodes, nodes > 0 else { return false }
        return (1...nodes).filter { isPlaced(on: $0) }.count > 1
    }

    /// The members of its cluster on `network` with `replicas` replicas a node (`host:port`, at the cluster port or,
    /// for `--blob-peers`, the RPC port), in the same order on every member: node by node, then replica index;
    /// removed nodes' left out.
    public func members(on network: Network, replicas: Int, clusterPorts: Bool = true) -> String {
        network.numbers.filter { isPlaced(on: $0) }.flatMap { node in
            (0..<replicas).map {
                "\(network.address(node)):\(port + $0 + (clusterPorts ? Network.clusterPortOffset : 0))"
            }
        }.joined(separator: ",")
    }

    /// The dqlite id of replica `index` on `node`: its place among the replicas of every node the stack ever had (a
    /// removed node keeps its places), counting from 1, so a member keeps its id as nodes come and go, and node 1's
    /// first replica bootstraps.
    public func memberID(_ index: Int, node: Int, replicas: Int) -> Int {
        (1..<max(node, 1)).filter { isPlaced(on: $0) }.count * replicas + index + 1
    }
}

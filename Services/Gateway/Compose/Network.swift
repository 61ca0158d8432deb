import Foundation

/// The nodes of `compose up --nodes N`, as STATE/network records them: N "machines" on this one, each a network
/// namespace (TAG-nodeN) whose link (TAG-vN) joins a bridge (TAG-br) on a private /24 where the host is SUBNET.1
/// and node N is SUBNET.(10+N). Nodes taken out by `node remove` keep their numbers.
struct Network {
    /// A clustered replica's member listens on its port + this.
    static let clusterPortOffset = 1000

    let tag: String
    let subnet: String
    let count: Int
    let removed: [Int]
    /// The services `up` started on the nodes, in compose's order (nil: a state that predates the list, every service).
    let services: [String]?

    /// The running stack's network, nil when it runs on one machine.
    static func read(state: String) -> Network? {
        guard let text = Files.read("\(state)/network") else { return nil }
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
    var numbers: [Int] { count > 0 ? (1...count).filter { !removed.contains($0) } : [] }

    func address(_ node: Int) -> String { "\(subnet).\(10 + node)" }
    func namespace(_ node: Int) -> String { "\(tag)-node\(node)" }
    func link(_ node: Int) -> String { "\(tag)-v\(node)" }
    var bridge: String { "\(tag)-br" }

    func place(_ node: Int, state: String) -> Place {
        Place(
            node: node, directory: "\(state)/nodes/\(node)", address: address(node),
            launcher: ["ip", "netns", "exec", namespace(node)])
    }
}

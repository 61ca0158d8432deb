import Foundation
import GatewayKit

/// `compose up [--nodes N] [--tls] [--insecure-plaintext-cluster] [SERVICE…]`, read and checked (the services named
/// are the manifest's to check).
public struct UpArguments: Sendable, Equatable {
    public var tls = false
    public var plaintextCluster = false
    /// --nodes N (1-ServiceList.maxNode), nil without it.
    public var nodes: Int?
    public var names: [String] = []

    public init(tls: Bool = false, plaintextCluster: Bool = false, nodes: Int? = nil, names: [String] = []) {
        self.tls = tls
        self.plaintextCluster = plaintextCluster
        self.nodes = nodes
        self.names = names
    }

    public static func parse(_ arguments: [String]) throws(ComposeFailure) -> UpArguments {
        var result = UpArguments(), nodesText: String?
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--tls": result.tls = true
            case "--insecure-plaintext-cluster": result.plaintextCluster = true
            case "--nodes":
                guard let count = rest.popFirst() else {
                    throw ComposeFailure("--nodes needs a count (compose up --nodes 3)")
                }
                nodesText = count
            case _ where argument.hasPrefix("--nodes="): nodesText = String(argument.dropFirst("--nodes=".count))
            default: result.names.append(argument)
            }
        }
        if let text = nodesText {
            guard (1...2).contains(text.count), text.allSatisfy({ $0.isASCII && $0.isNumber }), let count = Int(text),
                (1...ServiceList.maxNode).contains(count)
            else {
                throw ComposeFailure("--nodes must be a count 1-\(ServiceList.maxNode) (got '\(text)')")
            }
            result.nodes = count
        }
        return result
    }
}

/// `compose scale SERVICE=N`'s assignments.
public enum ScaleArgument {
    /// One assignment: the service the manifest knows by that name and its replica count (0-99999, decimal even
    /// with leading zeros).
    public static func parse(_ assignment: String, in manifest: Manifest) throws(ComposeFailure) -> (
        service: ServiceSettings, count: Int
    ) {
        guard let equals = assignment.firstIndex(of: "=") else {
            throw ComposeFailure("usage: compose scale SERVICE=N (got '\(assignment)')")
        }
        let service = try manifest.service(String(assignment[..<equals]))
        let digits = assignment[assignment.index(after: equals)...].drop { $0 == "0" }
        let text = digits.isEmpty && assignment.last == "0" ? "0" : String(digits)
        guard (1...5).contains(text.count), text.allSatisfy({ $0.isASCII && $0.isNumber }), let count = Int(text)
        else {
            throw ComposeFailure("replica count must be a number (0-99999): \(assignment)")
        }
        return (service, count)
    }
}

/// The ports replicas take: replica i of a service at its port + i and, clustered, its member at that + 1000.
public enum PortPlan {
    /// Refuses `count` replicas of `service` when one would listen past 65535 or on the ports of `others` (each with
    /// the replica count the stack runs of it), or, clustered, its cluster member would.
    public static func check(
        _ service: ServiceSettings, _ count: Int, clustered: Bool, others: [(ServiceSettings, Int)]
    ) throws(ComposeFailure) {
        guard count > 0 else { return }
        let first = service.port, last = first + count - 1, offset = Network.clusterPortOffset
        guard last <= 65535 else {
            throw ComposeFailure("\(service.name).\(count - 1) would listen on port \(last), above 65535")
        }
        if clustered, last + offset > 65535 {
            throw ComposeFailure(
                "\(service.name).\(count - 1)'s cluster port would be \(last + offset) (its port + \(offset)), above 65535"
            )
        }
        for (other, theirs) in others where other.name != service.name {
            guard theirs > 0 else { continue }
            let low = other.port, high = low + theirs - 1
            guard last < low || first > high else {
                throw ComposeFailure(
                    "\(count) replicas of \(service.name) would listen on ports \(first)-\(last), and \(other.name) has \(low)-\(high)"
                )
            }
            // A cluster member on another service's port cannot listen.
            if clustered, !(last + offset < low || first + offset > high) {
                throw ComposeFailure(
                    "\(service.name)'s cluster ports would be \(first + offset)-\(last + offset) (its ports + \(offset)), and \(other.name) listens on \(low)-\(high)"
                )
            }
        }
    }
}

/// STATE/endpoints, where the gateway finds the replicas: each line `SERVICE HOST:PORT [node=N]`.
public enum EndpointsFile {
    /// The lines grouped by service (in name order), each service's in the order given.
    public static func text(_ lines: [(service: String, line: String)]) -> String {
        let sorted = lines.enumerated().sorted { ($0.element.service, $0.offset) < ($1.element.service, $1.offset) }
        return sorted.map { $0.element.line + "\n" }.joined()
    }
}

import ComposeKit
import Foundation

extension Network {
    /// The running stack's network, nil when it runs on one machine.
    static func read(state: String) -> Network? { Files.read("\(state)/network").map(Network.parse) }

    func place(_ node: Int, state: String) -> Place {
        Place(
            node: node, directory: "\(state)/nodes/\(node)", address: address(node),
            launcher: ["ip", "netns", "exec", namespace(node)])
    }
}

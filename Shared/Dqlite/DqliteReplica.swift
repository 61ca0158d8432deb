/// This process's member of a cluster whose nodes are a list of addresses, as `--cluster` gives them: the node
/// at `addresses[i]` has id `i + 1` unless given its own (a node keeps its id for the life of its data, while the
/// list changes as nodes are added and removed), so node 1 bootstraps the cluster, and every other node, once
/// running, asks the leader to make it a voter (`DqliteClient.join`; nothing changes when it is one already, as
/// after a restart). Every replica lists the addresses in the same order.
public final class DqliteReplica: Sendable {
    public let node: DqliteNode
    /// A client of the whole cluster (its leader), for this process's statements.
    public let client: DqliteClient

    /// Starts this process's node, the one at `ownAddress`, and joins it to the cluster; returns when it is a
    /// voter. Joining needs a leader, so it waits up to `joinWait` for node 1 or a quorum to be up.
    ///
    /// - Parameters:
    ///   - bindAddress: where the node listens when that differs from `ownAddress` (0.0.0.0:port in a container).
    ///   - tls: Raft and statements over mutual TLS (`ClusterTLS`), the same credentials for the node and its client.
    ///   - leaderWait: how long a statement of `client` waits for a leader before UNAVAILABLE: an election takes
    ///     a second or two; a cluster without a quorum should answer within a client's deadline, not hang.
    public init(
        addresses: [String], ownAddress: String, id: UInt64? = nil, bindAddress: String? = nil, dataDirectory: String,
        database: String,
        networkLatency: Duration? = nil, leaderWait: Duration = .seconds(5), joinWait: Duration = .seconds(30),
        tls: ClusterTLS? = nil
    ) throws(DqliteError) {
        guard let position = addresses.firstIndex(of: ownAddress) else {
            throw DqliteError(
                .misuse,
                "this node's address \(ownAddress) is not in the cluster's list (\(addresses.joined(separator: ",")))")
        }
        guard Set(addresses).count == addresses.count else {
            throw DqliteError(
                .misuse, "the cluster's list names an address twice (\(addresses.joined(separator: ",")))")
        }
        let id = id ?? UInt64(position + 1)
        node = try DqliteNode(
            id: id, address: ownAddress, dataDirectory: dataDirectory, bindAddress: bindAddress,
            networkLatency: networkLatency,
            tls: tls)
        try node.start()
        let timeouts = DqliteClient.timeouts(networkLatency: networkLatency)
        client = try DqliteClient(
            addresses: addresses, database: database, callTimeout: timeouts.call, discoveryTimeout: timeouts.discovery,
            leaderWait: leaderWait, tls: tls, localNode: ownAddress)
        do {
            if id != 1 {
                try DqliteClient(addresses: addresses, database: database, leaderWait: joinWait, tls: tls).join(
                    id: id, address: ownAddress)
            }
        } catch {
            try? node.stop()
            throw error
        }
    }

    /// Stops the node (its thread ends; the Raft log stays in the data directory for the next start).
    public func stop() throws(DqliteError) { try node.stop() }
}

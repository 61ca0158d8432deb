import ArgumentParser
import BlobStore
import BlobsService
import ClassificationAPI
import ClassificationCore
import ClassificationService
import Foundation
import Identity
import Jobs
import JobsAPI
import JobsService
import ServiceKit
import Transport

/// The classification service executable: datasets, training (jobs on the heavy-work lane), evaluation and
/// predictions on libtorch.
@main
struct ClassificationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "classification",
        abstract:
            "Menagerie's classification service: image classifiers and object detectors trained from labelled photos.",
        discussion: """
            Datasets, models, the catalogue and jobs live in one SQLite file (--database, default \
            DATA_DIR/classification.sqlite); replicas given the same file serve the same models. With --cluster they \
            live in the dqlite cluster the replicas form, except the images and model files: those are kept by \
            content hash on each replica's disk (DATA_DIR/blobs) and copied to another replica (--blob-peers) \
            before a write is acknowledged.
            """)

    @OptionGroup var options: ServiceOptions

    @Option(
        name: .customLong("torch-threads"),
        help: "libtorch's threads for each training or prediction (default: the cores).")
    var torchThreads: Int?

    @Option(name: .customLong("max-upload-bytes"), help: "The largest dataset or model upload, in bytes.")
    var maxUploadBytes = 1 << 30

    @Option(
        name: .customLong("feature-print"),
        help:
            "The pretrained feature print's folder (`train --algorithm transfer`; default: $MENAGERIE_FEATURE_PRINT, which compose sets; without one, transfer is refused and photos train with cnn)."
    )
    var featurePrint: String?

    @Option(
        name: .customLong("blob-peers"),
        help:
            "With --cluster: the RPC addresses (host:port, comma-separated) of the service's other replicas, which keep the images and model files by content hash with this one: a write waits for a second copy on one of them, a replica missing a file fetches it from them. This replica's own address (--host:--port) may be listed: it is left out. Default: none (this replica's disk only)."
    )
    var blobPeers: String?

    @Option(
        name: .customLong("blob-repair-interval"),
        help:
            "With --cluster: seconds between checks that every blob this replica holds is on two replicas, sending copies where one was lost (default 600)."
    )
    var blobRepairInterval = 600

    /// The `--blob-peers` list without this replica's own address.
    var peerAddresses: [String] {
        let own = "\(options.host):\(options.port)"
        return (blobPeers ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            !$0.isEmpty && $0 != own
        }
    }

    func validate() throws {
        guard blobRepairInterval >= 1 else { throw ValidationError("--blob-repair-interval must be at least 1 second") }
        if blobPeers != nil {
            guard options.cluster != nil else {
                throw ValidationError(
                    "--blob-peers needs --cluster (one machine keeps images and models in its SQLite file)")
            }
            for address in peerAddresses where (try? Endpoint(parsing: address)) == nil {
                throw ValidationError("--blob-peers takes host:port addresses separated by commas (got \"\(address)\")")
            }
        }
        if let torchThreads, !(1...256).contains(torchThreads) {
            throw ValidationError("--torch-threads must be 1…256")
        }
        guard maxUploadBytes > 0 else { throw ValidationError("--max-upload-bytes must be positive") }
    }

    /// Exits 0 after a graceful stop, 1 when the service could not start or a background service failed.
    func run() async throws {
        do {
            try await ServiceRunner.run(name: "classification", options: options) {
                [peerAddresses, blobRepairInterval] environment in
                // On a cluster the database goes through Raft, so the large payloads stay out of it (see ClassificationStore).
                var blobs: ReplicatedBlobs?
                if environment.cluster != nil {
                    blobs = try Self.blobStore(environment, peers: peerAddresses, options: options)
                }
                let store = ClassificationStore(
                    database: try environment.openDatabase(migrations: ClassificationStore.migrations), blobs: blobs)
                // Trainings are recorded beside the models so every replica answers for them.
                let jobs = try await ServiceJobs(
                    database: store.database, logger: environment.logger,
                    shutdownGrace: environment.shutdownGrace, limits: environment.jobs)
                var limits = ClassificationService.Limits()
                if let torchThreads { limits.torchThreads = torchThreads }
                limits.maxUploadBytes = maxUploadBytes
                let featurePrint = FeaturePrintSource(
                    directory: featurePrint ?? ProcessInfo.processInfo.environment["MENAGERIE_FEATURE_PRINT"])
                let service = ClassificationService(
                    store: store, lane: environment.lane, jobs: jobs.runner, limits: limits, featurePrint: featurePrint,
                    logger: environment.logger)
                return AppServices(
                    rpc: [service, jobs.rpcService]
                        + (try blobs.map { [try Self.blobsService($0, environment, options: options)] } ?? []),
                    // The apps' models loaded and warmed before their first call.
                    background: [jobs.backgroundService, service.warmer(logger: environment.logger)]
                        + (blobs.map { blobs in
                            // Off the cooperative pool: the store's read blocks its thread.
                            [
                                blobs.repairer(every: .seconds(blobRepairInterval)) {
                                    try await environment.lane.run { try store.blobHashes() }
                                }
                            ]
                        } ?? []),
                    // Activated models serve everyone (classify, list, search the catalogue); changing which models and
                    // which catalogue every user gets is the admin's; datasets, trainings and jobs need a user; blobs
                    // pass between replicas only (with the admin token): as the protos say.
                    access: .declared)
            }
        } catch {
            throw ExitCode.failure
        }
    }

    /// This replica's blobs (DATA_DIR/blobs) and its peers', reached with the stack's admin token (the Blobs rpcs are
    /// the admin's: no user, let alone an anonymous caller, writes or reads a blob) and, on a TLS stack, this
    /// replica's own certificate as the client's (mutual TLS).
    static func blobStore(_ environment: ServiceRunner.Environment, peers: [String], options: ServiceOptions) throws
        -> ReplicatedBlobs
    {
        let local = try BlobStore(directory: environment.dataDirectory.appendingPathComponent("blobs").path)
        let token = try options.adminToken()
        if !peers.isEmpty, token == nil {
            throw ClassificationError(
                .failedPrecondition,
                "--blob-peers: the peers' Blobs rpcs need the stack's admin token (--admin-token-file or MENAGERIE_ADMIN_TOKEN)"
            )
        }
        let tls: TLSCredentials? =
            if let certificate = options.tlsCertificate, let key = options.tlsKey, let ca = options.tlsCA {
                try TLSCredentials.client(certificateFile: certificate, keyFile: key, caFile: ca)
            } else { nil }
        environment.logger.info(
            "blobs in \(local.directory), copied to one of \(peers.count) peer(s)\(peers.isEmpty ? "" : ": " + peers.joined(separator: ","))"
        )
        return ReplicatedBlobs(
            local: local, peers: try ReplicatedBlobs.peers(addresses: peers, token: token, tls: tls),
            logger: environment.logger)
    }

    /// The Blobs rpcs this replica serves its peers: on a TLS stack only to callers presenting this replica's own
    /// certificate's subject (the service's: its other replicas), besides the admin token the guard asks for.
    static func blobsService(
        _ blobs: ReplicatedBlobs, _ environment: ServiceRunner.Environment, options: ServiceOptions
    ) throws -> BlobsService {
        BlobsService(
            store: blobs.local, lane: environment.lane,
            replicaCertificate: try options.tlsCredentials()?.context.certificate?.subject)
    }

}

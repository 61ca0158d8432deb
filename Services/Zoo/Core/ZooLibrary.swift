import Dispatch
import Foundation
import Storage
import Synchronization

/// How far an import has got.
public struct ImportProgress: Sendable, Equatable {
    public enum Stage: Sendable, Equatable { case parsing, writing, indexing, done }

    public var stage: Stage
    /// 0…1.
    public var fraction: Double
    public var message: String
}

/// The zoo's data: stored in SQLite, answered from an in-memory `ZooSnapshot` that is rebuilt when the stored
/// data changes, also when another process sharing the database file imported.
///
/// An import is one write transaction: readers (in this process or another) see the old data or the new, never
/// a mix, and a failed import leaves the old data in place and is recorded with its error.
public final class ZooLibrary: Sendable {
    public let database: Database
    /// Walking pace for route durations, in metres per second.
    public let walkingSpeed: Double
    /// How long a check for other processes' imports stays valid.
    public let recheckInterval: Duration
    private let loaded: Mutex<Loaded>
    /// `DispatchTime` uptime in nanoseconds of the last check of `Database.dataVersion`.
    private let lastCheck = Atomic<UInt64>(0)
    /// Held while the snapshot is rebuilt, so that only one caller rebuilds it.
    private let rebuilding = Mutex(())

    private struct Loaded {
        /// `Database.dataVersion` when the snapshot was last known to be current.
        var dataVersion: Int64
        /// The import generation (`ZooTables.generation`) the snapshot was built from.
        var generation: Int64
        var snapshot: ZooSnapshot
    }

    /// Serves the data stored in `database` (migrated with `ZooSchema.migrations`). Imports by other processes
    /// are noticed at the first call `recheckInterval` after the previous check.
    public init(database: Database, walkingSpeed: Double = 1.2, recheckInterval: Duration = .milliseconds(50)) throws {
        self.database = database
        self.walkingSpeed = walkingSpeed
        self.recheckInterval = recheckInterval
        let version = try database.dataVersion
        let (generation, data) = try database.read { db in (try ZooTables.generation(db), try ZooTables.loadDataSet(db))
        }
        loaded = Mutex(
            Loaded(dataVersion: version, generation: generation, snapshot: data.snapshot(walkingSpeed: walkingSpeed)))
    }

    /// Opens (creating and migrating when needed) the database file at `path`.
    public convenience init(path: String, walkingSpeed: Double = 1.2, recheckInterval: Duration = .milliseconds(50))
        throws
    {
        try self.init(
            database: Database(path: path, migrations: ZooSchema.migrations), walkingSpeed: walkingSpeed,
            recheckInterval: recheckInterval)
    }

    /// The current data. At most every `recheckInterval` it checks (cheaply) whether another connection
    /// committed, and if the data changed rebuilds the snapshot first; callers arriving during a rebuild get
    /// the previous snapshot. This process's own imports are visible as soon as they return.
    public func snapshot() throws -> ZooSnapshot {
        let now = DispatchTime.now().uptimeNanoseconds
        let previous = lastCheck.load(ordering: .relaxed)
        guard recheckIsDue(now: now, lastCheck: previous),
            lastCheck.compareExchange(expected: previous, desired: now, ordering: .relaxed).exchanged
        else { return loaded.withLock { $0.snapshot } }
        let version = try database.dataVersion
        let current = loaded.withLock { $0 }
        guard current.dataVersion != version else { return current.snapshot }
        return try rebuilding.withLockIfAvailable { _ in try rebuild(seen: version) } ?? current.snapshot
    }

    /// The import generation of the data `snapshot()` serves now, when its last check for other processes' imports
    /// is less than `recheckInterval` old; nil when a check is due (the next `snapshot()` makes it). Never touches
    /// the database: what a cache of answers keys them by on an event loop, so that a kept answer is never older
    /// than an answer `snapshot()` would give.
    public var checkedGeneration: Int64? {
        guard !recheckIsDue(now: DispatchTime.now().uptimeNanoseconds, lastCheck: lastCheck.load(ordering: .relaxed))
        else { return nil }
        return loaded.withLock { $0.generation }
    }

    /// Whether `recheckInterval` has passed since the check at `lastCheck` (`DispatchTime` uptime nanoseconds).
    private func recheckIsDue(now: UInt64, lastCheck: UInt64) -> Bool {
        now &- lastCheck >= UInt64(recheckInterval / .nanoseconds(1))
    }

    /// Whether nothing was ever imported successfully.
    public var isEmpty: Bool {
        get throws { try database.read(ZooTables.generation) == 0 }
    }

    /// The import metadata and counts of what is stored (blocks the calling thread on SQLite; handlers use the
    /// async overload, which reads on the database's reader threads).
    public func metadata() throws -> ZooMetadata {
        try database.read(ZooTables.metadata)
    }

    /// The import metadata and counts, read off the cooperative pool so a handler never holds a worker on SQLite.
    public func metadata() async throws -> ZooMetadata {
        try await database.read { try ZooTables.metadata($0) }
    }

    /// Imports `files` (at most one of each kind) in one transaction and rebuilds the snapshot.
    ///
    /// Each file kind replaces its part of the data; the rest stays. Returns the import's record, or `nil` when
    /// it was not needed: `onlyIfEmpty` and data exists, or `scheduledFor` was already imported by another
    /// process. Throws `ZooError` for unreadable files and `StorageError` when the database fails; either way
    /// the old data stays and the failure is recorded in the import metadata.
    @discardableResult
    public func importFiles(
        _ files: [ZooSourceFile], source: String, trigger: ImportTrigger, scheduledFor: Date? = nil,
        onlyIfEmpty: Bool = false, progress: (ImportProgress) -> Void = { _ in }
    ) throws -> ImportRecord? {
        let started = Date()
        let totalBytes = max(1, files.reduce(0) { $0 + $1.content.count })
        do {
            let batch = try ImportBatch.parse(files) { index in
                let done = files[..<index].reduce(0) { $0 + $1.content.count }
                progress(
                    ImportProgress(
                        stage: .parsing, fraction: 0.6 * Double(done) / Double(totalBytes),
                        message: "parsing \(files[index].name)"))
            }
            progress(ImportProgress(stage: .writing, fraction: 0.6, message: "writing"))
            let record: ImportRecord? = try database.write { db in
                if onlyIfEmpty, try ZooTables.generation(db) != 0 { return nil }
                if let scheduledFor, try ZooTables.hasScheduledImport(for: scheduledFor, db) { return nil }
                let id = try ZooTables.insertImport(
                    source: source, trigger: trigger, scheduledFor: scheduledFor, startedAt: started,
                    finishedAt: started,
                    files: batch.files, error: nil, db)
                try ZooTables.write(batch, importID: id, db) { message in
                    progress(ImportProgress(stage: .writing, fraction: 0.7, message: "writing \(message)"))
                }
                let finished = Date()
                try db.execute(
                    "UPDATE imports SET finished_at = ?, lexicon_merge = ? WHERE id = ?",
                    [finished.timeIntervalSince1970, try batch.lexiconMerge.map(ZooTables.encodeMerge), id])
                return ImportRecord(
                    id: id, source: source, trigger: trigger, startedAt: started, finishedAt: finished,
                    succeeded: true, files: batch.files, error: nil, lexiconMerge: batch.lexiconMerge)
            }
            guard let record else { return nil }
            progress(ImportProgress(stage: .indexing, fraction: 0.85, message: "indexing"))
            try rebuilding.withLock { _ in _ = try rebuild(seen: try database.dataVersion) }
            progress(
                ImportProgress(
                    stage: .done, fraction: 1,
                    message: "imported \(record.rowsImported) records, skipped \(record.rowsSkipped)"))
            return record
        } catch {
            recordFailedImport(
                source: source, trigger: trigger, scheduledFor: scheduledFor, startedAt: started,
                files: files.map {
                    ImportedFile(
                        kind: $0.kind, name: $0.name, sizeBytes: $0.content.count, rowsImported: 0, skipped: [])
                },
                error: error)
            throw error
        }
    }

    /// Records an import that failed (also one whose files could not be fetched) in the import metadata.
    /// Best effort: a database that cannot record it is not reported a second time.
    public func recordFailedImport(
        source: String, trigger: ImportTrigger, scheduledFor: Date? = nil, startedAt: Date, files: [ImportedFile] = [],
        error: any Error
    ) {
        _ = try? database.write { db in
            try ZooTables.insertImport(
                source: source, trigger: trigger, scheduledFor: scheduledFor, startedAt: startedAt, finishedAt: Date(),
                files: files, error: String(describing: error), db)
        }
    }

    /// Whether the schedule's firing at `date` was imported already, by this process or another sharing the file.
    public func hasImported(scheduledFor date: Date) throws -> Bool {
        try database.read { try ZooTables.hasScheduledImport(for: date, $0) }
    }

    /// Imports the sample data in `directory` when nothing was imported yet (the check is repeated inside the
    /// import's transaction, so replicas starting together load it once). Returns `nil` when data exists.
    @discardableResult
    public func loadSampleDataIfEmpty(from directory: URL) throws -> ImportRecord? {
        guard try isEmpty else { return nil }
        return try importFiles(
            ZooSourceFile.directory(directory), source: "sample data in \(directory.path)",
            trigger: .sampleData, onlyIfEmpty: true)
    }

    /// Reloads the snapshot when the stored generation differs from the loaded one. Call with `rebuilding` held.
    private func rebuild(seen version: Int64) throws -> ZooSnapshot {
        let current = loaded.withLock { $0 }
        let generation = try database.read(ZooTables.generation)
        guard generation != current.generation else {
            loaded.withLock { $0.dataVersion = version }
            return current.snapshot
        }
        let (loadedGeneration, data) = try database.read { db in
            (try ZooTables.generation(db), try ZooTables.loadDataSet(db))
        }
        let snapshot = data.snapshot(walkingSpeed: walkingSpeed)
        loaded.withLock { $0 = Loaded(dataVersion: version, generation: loadedGeneration, snapshot: snapshot) }
        return snapshot
    }
}

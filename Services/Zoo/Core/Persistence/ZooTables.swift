import Foundation
import Storage

/// Reads and writes the zoo tables (see `ZooSchema`) inside a `Database` transaction.
enum ZooTables {
    /// The name under which `dataset_layers` records the lexicon (the other layers use their file kind).
    static let lexiconLayer = "lexicon"
    /// Import records kept; older ones are pruned unless a layer still refers to them.
    static let keptImports = 100

    // MARK: Import metadata

    /// The id of the last successful import: it changes exactly when the data does (0 before the first import).
    static func generation(_ db: Connection) throws -> Int64 {
        try db.queryOne("SELECT coalesce(max(id), 0) FROM imports WHERE succeeded = 1")?.int64(0) ?? 0
    }

    /// Whether an import for the schedule's firing at `date` already succeeded (another replica ran it).
    static func hasScheduledImport(for date: Date, _ db: Connection) throws -> Bool {
        try db.queryOne(
            "SELECT 1 FROM imports WHERE scheduled_for = ? AND succeeded = 1", [date.timeIntervalSince1970]) != nil
    }

    /// Inserts an import record with its files and skipped rows; returns its id.
    static func insertImport(
        source: String, trigger: ImportTrigger, scheduledFor: Date?, startedAt: Date, finishedAt: Date,
        files: [ImportedFile], error: String?, _ db: Connection
    ) throws -> Int64 {
        try db.execute(
            """
            INSERT INTO imports (source, trigger, scheduled_for, started_at, finished_at, succeeded, error)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """,
            [
                source, trigger.rawValue, scheduledFor?.timeIntervalSince1970, startedAt.timeIntervalSince1970,
                finishedAt.timeIntervalSince1970, error == nil, error,
            ])
        let id = db.lastInsertRowID
        let insertFile = try db.prepare(
            "INSERT INTO import_files (import_id, position, kind, name, size_bytes, rows_imported) VALUES (?, ?, ?, ?, ?, ?)"
        )
        let insertSkipped = try db.prepare(
            """
            INSERT INTO import_skipped_rows (import_id, file_position, position, row, line, reason)
            VALUES (?, ?, ?, ?, ?, ?)
            """)
        for (position, file) in files.enumerated() {
            try insertFile.execute([id, position, file.kind.rawValue, file.name, file.sizeBytes, file.rowsImported])
            for (index, row) in file.skipped.enumerated() {
                try insertSkipped.execute([id, position, index, row.row, row.line, row.reason])
            }
        }
        try db.execute(
            "DELETE FROM imports WHERE id <= ? AND id NOT IN (SELECT import_id FROM dataset_layers)",
            [id - Int64(keptImports)])
        return id
    }

    static func metadata(_ db: Connection) throws -> ZooMetadata {
        func record(_ condition: String) throws -> ImportRecord? {
            guard let row = try db.queryOne("SELECT * FROM imports \(condition) ORDER BY id DESC LIMIT 1") else {
                return nil
            }
            return try importRecord(row, db)
        }
        func count(_ table: String, _ condition: String = "") throws -> Int {
            try db.queryOne("SELECT count(*) FROM \(table) \(condition)")?.int(0) ?? 0
        }
        var counts = DataCounts()
        counts.animals = try count("animals")
        counts.classes = try count("classes")
        counts.orders = try count("orders")
        counts.continents = try count("continents")
        counts.biotopes = try count("biotopes")
        counts.foods = try count("foods")
        counts.zooHouses = try count("zoo_houses")
        counts.mapLocations = try count("map_locations")
        counts.adoptions = try count("adoptions")
        counts.footpathNodes = try count("footpath_nodes")
        counts.footpathEdges = try count("footpath_edges")
        counts.availableAnimals = try availableAnimals(db).count
        counts.lexiconCSVOnly = try count("animals", "WHERE sources = 'lexicon_csv'")
        counts.animalsJSONOnly = try count("animals", "WHERE sources = 'animals_json'")
        counts.bothSources = try count("animals", "WHERE sources = 'lexicon_csv,animals_json'")
        let lexiconKind = try db.queryOne("SELECT kind FROM dataset_layers WHERE layer = ?", [lexiconLayer])?
            .string(0).flatMap(ZooFileKind.init(rawValue:))
        return ZooMetadata(
            lastImport: try record(""), lastSuccessfulImport: try record("WHERE succeeded = 1"),
            lastFailedImport: try record("WHERE succeeded = 0"), counts: counts, lexiconKind: lexiconKind)
    }

    private static func importRecord(_ row: Row, _ db: Connection) throws -> ImportRecord {
        let id: Int64 = try row.value("id")
        var files: [ImportedFile] = []
        for file in try db.query("SELECT * FROM import_files WHERE import_id = ? ORDER BY position", [id]) {
            let skipped = try db.query(
                "SELECT row, line, reason FROM import_skipped_rows WHERE import_id = ? AND file_position = ? ORDER BY position",
                [id, try file.value("position", as: Int.self)]
            ).map { SkippedRow(row: $0.int(0) ?? 0, line: $0.int(1) ?? 0, reason: $0.string(2) ?? "") }
            files.append(
                ImportedFile(
                    kind: ZooFileKind(rawValue: try file.value("kind")) ?? .lexiconCSV, name: try file.value("name"),
                    sizeBytes: try file.value("size_bytes"), rowsImported: try file.value("rows_imported"),
                    skipped: skipped))
        }
        return ImportRecord(
            id: id, source: try row.value("source"),
            trigger: ImportTrigger(rawValue: try row.value("trigger")) ?? .client,
            startedAt: Date(timeIntervalSince1970: try row.value("started_at")),
            finishedAt: Date(timeIntervalSince1970: try row.value("finished_at")),
            succeeded: try row.value("succeeded"), files: files, error: try row.value("error", as: String?.self),
            lexiconMerge: try row.string("lexicon_merge").map(decodeMerge))
    }

    static func encodeMerge(_ report: LexiconMergeReport) throws -> String {
        String(decoding: try JSONEncoder().encode(report), as: UTF8.self)
    }

    static func decodeMerge(_ text: String) throws -> LexiconMergeReport {
        try JSONDecoder().decode(LexiconMergeReport.self, from: Data(text.utf8))
    }

    // MARK: Writing the data

    /// Replaces the layers `batch` carries and records that import `importID` provided them.
    static func write(_ batch: ImportBatch, importID: Int64, _ db: Connection, progress: (String) -> Void) throws {
        var layers: [(String, ZooFileKind)] = []
        if let lexicon = batch.lexicon {
            layers.append((lexiconLayer, lexicon.kind))
            try db.execute("DELETE FROM animals")
            for table in ["classes", "orders", "continents", "biotopes", "foods", "zoo_houses"] {
                try db.execute("DELETE FROM \(table)")
            }
        }
        if let features = batch.mapFeatures {
            progress("map locations")
            layers.append((ZooFileKind.animalsJSON.rawValue, .animalsJSON))
            try replaceMapLocations(features, availability: batch.availability ?? [:], db)
        }
        if let lexicon = batch.lexicon {
            progress("\(lexicon.animals.count) animals")
            try insertAnimals(lexicon.animals, db)
        }
        if let network = batch.network {
            progress("footpaths")
            layers.append((ZooFileKind.map.rawValue, .map))
            try replaceFootpaths(network, db)
        }
        if let bounds = batch.bounds {
            layers.append((ZooFileKind.bounds.rawValue, .bounds))
            try db.execute("DELETE FROM map_bounds")
            try db.execute(
                "INSERT INTO map_bounds (id, north, east, south, west) VALUES (1, ?, ?, ?, ?)",
                [bounds.north, bounds.east, bounds.south, bounds.west])
        }
        if let adoptions = batch.adoptions {
            progress("adoptions")
            layers.append((ZooFileKind.adoptions.rawValue, .adoptions))
            try db.execute("DELETE FROM adoptions")
            let insert = try db.prepare(
                "INSERT INTO adoptions (czech_name, english_name, class_name, price_czk, visitable) VALUES (?, ?, ?, ?, ?)"
            )
            for adoption in adoptions {
                try insert.execute([
                    adoption.czechName, adoption.englishName, adoption.className, adoption.priceCZK, adoption.visitable,
                ])
            }
        }
        if let names = batch.pavilionNames {
            layers.append((ZooFileKind.pavilionFixes.rawValue, .pavilionFixes))
            try db.execute("DELETE FROM pavilion_name_fixes")
            let insert = try db.prepare("INSERT INTO pavilion_name_fixes (location_id, name) VALUES (?, ?)")
            for (id, name) in names.sorted(by: { $0.key < $1.key }) { try insert.execute([id, name]) }
        }
        if let singulars = batch.singulars {
            layers.append((ZooFileKind.singularPlural.rawValue, .singularPlural))
            try db.execute("DELETE FROM singular_forms")
            let insert = try db.prepare("INSERT INTO singular_forms (plural, position, singular) VALUES (?, ?, ?)")
            for (plural, forms) in singulars.sorted(by: { $0.key < $1.key }) {
                for (position, singular) in forms.enumerated() { try insert.execute([plural, position, singular]) }
            }
        }
        let record = try db.prepare(
            """
            INSERT INTO dataset_layers (layer, kind, import_id) VALUES (?, ?, ?)
            ON CONFLICT (layer) DO UPDATE SET kind = excluded.kind, import_id = excluded.import_id
            """)
        for (layer, kind) in layers { try record.execute([layer, kind.rawValue, importID]) }
    }

    private static func replaceMapLocations(_ features: [MapFeature], availability: [String: Bool], _ db: Connection)
        throws
    {
        try db.execute("DELETE FROM map_locations")
        try db.execute("DELETE FROM availability")
        let location = try db.prepare(
            "INSERT INTO map_locations (id, name, is_animal_pen, is_building, singular_names_given) VALUES (?, ?, ?, ?, ?)"
        )
        let point = try db.prepare(
            "INSERT INTO map_location_points (location_id, position, lat, lon) VALUES (?, ?, ?, ?)")
        let singular = try db.prepare(
            "INSERT INTO map_location_singulars (location_id, position, name) VALUES (?, ?, ?)")
        let animal = try db.prepare(
            "INSERT INTO map_location_animals (location_id, position, animal_name) VALUES (?, ?, ?)")
        for feature in features {
            try location.execute([
                feature.id, feature.name, feature.isAnimalPen, feature.isBuilding, feature.singularNames != nil,
            ])
            for (position, vertex) in feature.outline.enumerated() {
                try point.execute([feature.id, position, vertex.lat, vertex.lon])
            }
            for (position, name) in (feature.singularNames ?? []).enumerated() {
                try singular.execute([feature.id, position, name])
            }
            for (position, name) in feature.animalNames.enumerated() {
                try animal.execute([feature.id, position, name])
            }
        }
        let available = try db.prepare("INSERT INTO availability (name_key, available) VALUES (?, ?)")
        for (name, flag) in availability.sorted(by: { $0.key < $1.key }) { try available.execute([name, flag]) }
    }

    /// Stores the animals with their map links; "currently kept" is stored for animals from animals.json and
    /// left NULL for the CSV's own, which take it from the availability list by name.
    private static func insertAnimals(_ animals: [Animal], _ db: Connection) throws {
        var lookups = Lookups()
        let insert = try db.prepare(
            """
            INSERT INTO animals (id, name, latin_name, english_name, class_id, order_id, zoo_house_id, range,
                biotope_detail, food_detail, description, proportions, reproduction, interesting_facts, projects,
                breeding, location_url, image_url, image_alt, is_currently_available, sources, other_names)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        let lists = [
            ("animal_continents", "continent_id", "continents", \Animal.continents),
            ("animal_biotopes", "biotope_id", "biotopes", \Animal.biotopes),
            ("animal_foods", "food_id", "foods", \Animal.foods),
        ]
        let listInserts = try lists.map { table, column, _, _ in
            try db.prepare("INSERT INTO \(table) (animal_id, position, \(column)) VALUES (?, ?, ?)")
        }
        let link = try db.prepare(
            "INSERT INTO animal_map_locations (animal_id, position, location_id) VALUES (?, ?, ?)")
        for animal in animals {
            try insert.execute([
                animal.id, animal.name, animal.latinName, animal.englishName,
                try animal.taxonClass.map { try lookups.taxon($0, in: "classes", db) },
                try animal.order.map { try lookups.taxon($0, in: "orders", db) },
                try animal.location.map { try lookups.name($0, in: "zoo_houses", db) },
                animal.range, animal.biotopeDetail, animal.foodDetail, animal.description, animal.proportions,
                animal.reproduction, animal.interestingFacts, animal.projects, animal.breeding, animal.locationURL,
                animal.imageURL, animal.imageAlt,
                animal.sources.contains(.animalsJSON) ? animal.isCurrentlyAvailable : nil,
                animal.sources.map(\.rawValue).joined(separator: ","),
                animal.otherNames.isEmpty ? nil : animal.otherNames.joined(separator: "\n"),
            ])
            for ((_, _, lookupTable, keyPath), listInsert) in zip(lists, listInserts) {
                for (position, value) in animal[keyPath: keyPath].enumerated() {
                    try listInsert.execute([animal.id, position, try lookups.name(value, in: lookupTable, db)])
                }
            }
            for (position, location) in animal.mapFeatureIDs.enumerated() {
                try link.execute([animal.id, position, location])
            }
        }
    }

    /// Ids of lookup rows (classes, foods, …), inserting each value once.
    private struct Lookups {
        private var ids: [String: [String: Int64]] = [:]

        mutating func name(_ value: String, in table: String, _ db: Connection) throws -> Int64 {
            if let id = ids[table]?[value] { return id }
            try db.execute("INSERT INTO \(table) (name) VALUES (?)", [value])
            ids[table, default: [:]][value] = db.lastInsertRowID
            return db.lastInsertRowID
        }

        mutating func taxon(_ taxon: Taxon, in table: String, _ db: Connection) throws -> Int64 {
            let key = taxon.czech + "\u{0}" + (taxon.latin ?? "")
            if let id = ids[table]?[key] { return id }
            try db.execute("INSERT INTO \(table) (czech, latin) VALUES (?, ?)", [taxon.czech, taxon.latin ?? ""])
            ids[table, default: [:]][key] = db.lastInsertRowID
            return db.lastInsertRowID
        }
    }

    private static func replaceFootpaths(_ network: FootpathNetwork, _ db: Connection) throws {
        try db.execute("DELETE FROM footpaths")
        try db.execute("DELETE FROM footpath_nodes")
        var positions: [Int64: GeoPoint] = [:]
        let node = try db.prepare("INSERT INTO footpath_nodes (id, lat, lon) VALUES (?, ?, ?)")
        for item in network.nodes where positions[item.id] == nil && Geo.isValid(item.position) {
            positions[item.id] = item.position
            try node.execute([item.id, item.position.lat, item.position.lon])
        }
        let footpath = try db.prepare("INSERT INTO footpaths (position, osm_id) VALUES (?, ?)")
        let edge = try db.prepare(
            "INSERT INTO footpath_edges (footpath, position, from_node, to_node, length_m) VALUES (?, ?, ?, ?, ?)")
        var stored = 0
        for road in network.roads {
            // As the graph does: vertices without a node and repeated vertices are skipped.
            var path: [Int64] = []
            for id in road.nodeIDs where positions[id] != nil && id != path.last { path.append(id) }
            guard path.count >= 2 else { continue }
            try footpath.execute([stored, road.id])
            for (position, (from, to)) in zip(path, path.dropFirst()).enumerated() {
                try edge.execute([stored, position, from, to, Geo.haversine(positions[from]!, positions[to]!)])
            }
            stored += 1
        }
    }

    // MARK: Reading the data

    /// Everything stored, as the data set the snapshot is built from.
    static func loadDataSet(_ db: Connection) throws -> ZooDataSet {
        ZooDataSet(
            lexicon: LexiconImport(animals: try animals(db), skipped: [], mapFeatures: try mapFeatures(db)),
            adoptions: try db.query(
                "SELECT czech_name, english_name, class_name, price_czk, visitable FROM adoptions ORDER BY id"
            ).map {
                Adoption(
                    czechName: $0.string(0) ?? "", englishName: $0.string(1), className: $0.string(2),
                    priceCZK: $0.int(3), visitable: $0.bool(4) ?? true)
            },
            network: try network(db), bounds: try bounds(db),
            joins: MapJoinTables(pavilionNames: try pavilionNames(db), singulars: try singulars(db)))
    }

    private static func animals(_ db: Connection) throws -> [Animal] {
        func taxa(_ table: String) throws -> [Int64: Taxon] {
            var result: [Int64: Taxon] = [:]
            for row in try db.query("SELECT id, czech, latin FROM \(table)") {
                result[row.int64(0) ?? 0] = Taxon(
                    czech: row.string(1) ?? "", latin: row.string(2).flatMap { $0.isEmpty ? nil : $0 })
            }
            return result
        }
        func names(_ table: String) throws -> [Int64: String] {
            Dictionary(
                try db.query("SELECT id, name FROM \(table)").map { ($0.int64(0) ?? 0, $0.string(1) ?? "") },
                uniquingKeysWith: { first, _ in first })
        }
        func lists(_ table: String, _ column: String, _ values: [Int64: String]) throws -> [Int: [String]] {
            var result: [Int: [String]] = [:]
            for row in try db.query("SELECT animal_id, \(column) FROM \(table) ORDER BY animal_id, position") {
                if let value = values[row.int64(1) ?? 0] { result[row.int(0) ?? 0, default: []].append(value) }
            }
            return result
        }
        let classes = try taxa("classes"), orders = try taxa("orders"), houses = try names("zoo_houses")
        let continents = try lists("animal_continents", "continent_id", names("continents"))
        let biotopes = try lists("animal_biotopes", "biotope_id", names("biotopes"))
        let foods = try lists("animal_foods", "food_id", names("foods"))
        var links: [Int: [Int64]] = [:]
        for row in try db.query("SELECT animal_id, location_id FROM animal_map_locations ORDER BY animal_id, position")
        {
            links[row.int(0) ?? 0, default: []].append(row.int64(1) ?? 0)
        }
        let availability = try availabilityList(db)
        return try db.query("SELECT * FROM animals ORDER BY id").map { row in
            let id: Int = try row.value("id")
            let name: String = try row.value("name")
            return Animal(
                id: id, name: name,
                otherNames: (row.string("other_names") ?? "").split(separator: "\n").map(String.init),
                latinName: row.string("latin_name"), englishName: row.string("english_name"),
                taxonClass: row.int64("class_id").flatMap { classes[$0] },
                order: row.int64("order_id").flatMap { orders[$0] },
                continents: continents[id] ?? [], range: row.string("range"), biotopes: biotopes[id] ?? [],
                biotopeDetail: row.string("biotope_detail"), foods: foods[id] ?? [],
                foodDetail: row.string("food_detail"),
                description: row.string("description"), proportions: row.string("proportions"),
                reproduction: row.string("reproduction"), interestingFacts: row.string("interesting_facts"),
                projects: row.string("projects"), breeding: row.string("breeding"),
                location: row.int64("zoo_house_id").flatMap { houses[$0] }, locationURL: row.string("location_url"),
                imageURL: row.string("image_url"), imageAlt: row.string("image_alt"),
                isCurrentlyAvailable: row.bool("is_currently_available") ?? availability[TextKey.nameKey(name)] ?? true,
                mapFeatureIDs: links[id] ?? [],
                sources: (row.string("sources") ?? "").split(separator: ",").compactMap {
                    ZooFileKind(rawValue: String($0))
                })
        }
    }

    private static func availabilityList(_ db: Connection) throws -> [String: Bool] {
        Dictionary(
            try db.query("SELECT name_key, available FROM availability").map {
                ($0.string(0) ?? "", $0.bool(1) ?? true)
            },
            uniquingKeysWith: { first, _ in first })
    }

    /// Ids of the animals currently kept, resolving a CSV lexicon's availability through the availability list.
    private static func availableAnimals(_ db: Connection) throws -> [Int] {
        let availability = try availabilityList(db)
        return try db.query("SELECT id, name, is_currently_available FROM animals").compactMap { row in
            let available = row.bool(2) ?? availability[TextKey.nameKey(row.string(1) ?? "")] ?? true
            return available ? row.int(0) : nil
        }
    }

    private static func mapFeatures(_ db: Connection) throws -> [MapFeature] {
        func grouped<T>(_ sql: String, _ value: (Row) -> T) throws -> [Int64: [T]] {
            var result: [Int64: [T]] = [:]
            for row in try db.query(sql) { result[row.int64(0) ?? 0, default: []].append(value(row)) }
            return result
        }
        let outlines = try grouped(
            "SELECT location_id, lat, lon FROM map_location_points ORDER BY location_id, position"
        ) {
            GeoPoint(lat: $0.double(1) ?? .nan, lon: $0.double(2) ?? .nan)
        }
        let singulars = try grouped(
            "SELECT location_id, name FROM map_location_singulars ORDER BY location_id, position"
        ) {
            $0.string(1) ?? ""
        }
        let animals = try grouped(
            "SELECT location_id, animal_name FROM map_location_animals ORDER BY location_id, position"
        ) {
            $0.string(1) ?? ""
        }
        return try db.query(
            "SELECT id, name, is_animal_pen, is_building, singular_names_given FROM map_locations ORDER BY id"
        ).map { row in
            let id = row.int64(0) ?? 0
            let given = row.bool(4) ?? (singulars[id] != nil)
            return MapFeature(
                id: id, name: row.string(1) ?? "", isAnimalPen: row.bool(2) ?? false, isBuilding: row.bool(3) ?? false,
                singularNames: given ? singulars[id] ?? [] : nil, outline: outlines[id] ?? [],
                animalNames: animals[id] ?? [])
        }
    }

    private static func network(_ db: Connection) throws -> FootpathNetwork {
        let nodes = try db.query("SELECT id, lat, lon FROM footpath_nodes ORDER BY id").map {
            FootpathNode(id: $0.int64(0) ?? 0, position: GeoPoint(lat: $0.double(1) ?? .nan, lon: $0.double(2) ?? .nan))
        }
        var roads: [Footpath] = []
        var current: (position: Int64, road: Footpath)?
        let edges = try db.query(
            """
            SELECT f.position, f.osm_id, e.from_node, e.to_node FROM footpath_edges e JOIN footpaths f ON f.position = e.footpath
            ORDER BY f.position, e.position
            """)
        for edge in edges {
            let position = edge.int64(0) ?? 0
            if current?.position != position {
                if let finished = current { roads.append(finished.road) }
                current = (position, Footpath(id: edge.int64(1) ?? 0, nodeIDs: [edge.int64(2) ?? 0]))
            }
            current!.road.nodeIDs.append(edge.int64(3) ?? 0)
        }
        if let finished = current { roads.append(finished.road) }
        return FootpathNetwork(nodes: nodes, roads: roads)
    }

    private static func bounds(_ db: Connection) throws -> MapBounds? {
        try db.queryOne("SELECT north, east, south, west FROM map_bounds").map {
            MapBounds(
                north: $0.double(0) ?? 0, east: $0.double(1) ?? 0, south: $0.double(2) ?? 0, west: $0.double(3) ?? 0)
        }
    }

    private static func pavilionNames(_ db: Connection) throws -> [Int64: String] {
        Dictionary(
            try db.query("SELECT location_id, name FROM pavilion_name_fixes").map {
                ($0.int64(0) ?? 0, $0.string(1) ?? "")
            },
            uniquingKeysWith: { first, _ in first })
    }

    private static func singulars(_ db: Connection) throws -> [String: [String]] {
        var table: [String: [String]] = [:]
        for row in try db.query("SELECT plural, singular FROM singular_forms ORDER BY plural, position") {
            table[row.string(0) ?? "", default: []].append(row.string(1) ?? "")
        }
        return table
    }
}

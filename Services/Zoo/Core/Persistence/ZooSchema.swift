import Storage

/// The zoo database's schema, as migrations for `Database`.
///
/// Normalised: the lexicon (animals with their class, order and pavilion, and ordered continent, biotope and
/// food lists over lookup tables), the map locations (outline, singular names, the animal names the source
/// placed there, and the animals JSON's own links), the availability list, adoptions, the footpath graph
/// (nodes, footpaths and their edges), the bounds, the join tables, and the import metadata. Each part is
/// a "layer" that one file kind replaces as a whole; `dataset_layers` records which import provided it.
public enum ZooSchema {
    public static let migrations: [Migration] = [
        Migration(1, "zoo data and import metadata") { db in try db.executeScript(version1) },
        // Which lexicon files each animal came from ("lexicon_csv,animals_json"); NULL for rows from before.
        Migration(2, "animal sources") { db in try db.execute("ALTER TABLE animals ADD COLUMN sources TEXT") },
        // The import's LexiconMergeReport as JSON; NULL unless it merged a lexicon CSV into animals.json.
        Migration(3, "lexicon merge report") { db in try db.execute("ALTER TABLE imports ADD COLUMN lexicon_merge TEXT")
        },
        // Animal.otherNames, one a line; NULL for none.
        Migration(4, "animal other names") { db in try db.execute("ALTER TABLE animals ADD COLUMN other_names TEXT") },
        // Whether the source gave a location's singular names at all (1) or left them out (0), so `null` stays apart
        // from `[]`; NULL for locations imported before: given when there are some.
        Migration(5, "singular names given") { db in
            try db.execute("ALTER TABLE map_locations ADD COLUMN singular_names_given INTEGER")
        },
    ]

    private static let version1 = """
        CREATE TABLE classes (
            id INTEGER PRIMARY KEY, czech TEXT NOT NULL, latin TEXT NOT NULL DEFAULT '', UNIQUE (czech, latin));
        CREATE TABLE orders (
            id INTEGER PRIMARY KEY, czech TEXT NOT NULL, latin TEXT NOT NULL DEFAULT '', UNIQUE (czech, latin));
        CREATE TABLE continents (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
        CREATE TABLE biotopes (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
        CREATE TABLE foods (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
        CREATE TABLE zoo_houses (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);

        CREATE TABLE animals (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            latin_name TEXT,
            english_name TEXT,
            class_id INTEGER REFERENCES classes (id),
            order_id INTEGER REFERENCES orders (id),
            zoo_house_id INTEGER REFERENCES zoo_houses (id),
            range TEXT, biotope_detail TEXT, food_detail TEXT, description TEXT, proportions TEXT,
            reproduction TEXT, interesting_facts TEXT, projects TEXT, breeding TEXT,
            location_url TEXT, image_url TEXT, image_alt TEXT,
            -- NULL when the source does not say (the CSV): the availability list decides by name.
            is_currently_available INTEGER);
        CREATE TABLE animal_continents (
            animal_id INTEGER NOT NULL REFERENCES animals (id) ON DELETE CASCADE, position INTEGER NOT NULL,
            continent_id INTEGER NOT NULL REFERENCES continents (id), PRIMARY KEY (animal_id, position));
        CREATE TABLE animal_biotopes (
            animal_id INTEGER NOT NULL REFERENCES animals (id) ON DELETE CASCADE, position INTEGER NOT NULL,
            biotope_id INTEGER NOT NULL REFERENCES biotopes (id), PRIMARY KEY (animal_id, position));
        CREATE TABLE animal_foods (
            animal_id INTEGER NOT NULL REFERENCES animals (id) ON DELETE CASCADE, position INTEGER NOT NULL,
            food_id INTEGER NOT NULL REFERENCES foods (id), PRIMARY KEY (animal_id, position));

        CREATE TABLE map_locations (
            id INTEGER PRIMARY KEY, name TEXT NOT NULL, is_animal_pen INTEGER NOT NULL, is_building INTEGER NOT NULL);
        CREATE TABLE map_location_points (
            location_id INTEGER NOT NULL REFERENCES map_locations (id) ON DELETE CASCADE, position INTEGER NOT NULL,
            lat REAL NOT NULL, lon REAL NOT NULL, PRIMARY KEY (location_id, position));
        CREATE TABLE map_location_singulars (
            location_id INTEGER NOT NULL REFERENCES map_locations (id) ON DELETE CASCADE, position INTEGER NOT NULL,
            name TEXT NOT NULL, PRIMARY KEY (location_id, position));
        CREATE TABLE map_location_animals (
            location_id INTEGER NOT NULL REFERENCES map_locations (id) ON DELETE CASCADE, position INTEGER NOT NULL,
            animal_name TEXT NOT NULL, PRIMARY KEY (location_id, position));
        CREATE TABLE animal_map_locations (
            animal_id INTEGER NOT NULL REFERENCES animals (id) ON DELETE CASCADE, position INTEGER NOT NULL,
            location_id INTEGER NOT NULL REFERENCES map_locations (id) ON DELETE CASCADE,
            PRIMARY KEY (animal_id, position));
        CREATE TABLE availability (name_key TEXT PRIMARY KEY, available INTEGER NOT NULL);

        CREATE TABLE adoptions (
            id INTEGER PRIMARY KEY, czech_name TEXT NOT NULL, english_name TEXT, class_name TEXT, price_czk INTEGER,
            visitable INTEGER NOT NULL);

        CREATE TABLE footpath_nodes (id INTEGER PRIMARY KEY, lat REAL NOT NULL, lon REAL NOT NULL);
        CREATE TABLE footpaths (position INTEGER PRIMARY KEY, osm_id INTEGER NOT NULL);
        -- An edge joins consecutive nodes of a footpath; its length is the haversine distance in metres.
        CREATE TABLE footpath_edges (
            footpath INTEGER NOT NULL REFERENCES footpaths (position) ON DELETE CASCADE, position INTEGER NOT NULL,
            from_node INTEGER NOT NULL REFERENCES footpath_nodes (id),
            to_node INTEGER NOT NULL REFERENCES footpath_nodes (id),
            length_m REAL NOT NULL, PRIMARY KEY (footpath, position));
        CREATE TABLE map_bounds (
            id INTEGER PRIMARY KEY CHECK (id = 1), north REAL NOT NULL, east REAL NOT NULL, south REAL NOT NULL,
            west REAL NOT NULL);
        CREATE TABLE pavilion_name_fixes (location_id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE TABLE singular_forms (
            plural TEXT NOT NULL, position INTEGER NOT NULL, singular TEXT NOT NULL, PRIMARY KEY (plural, position));

        CREATE TABLE imports (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            source TEXT NOT NULL,
            trigger TEXT NOT NULL,
            -- For scheduled refreshes: the time the schedule fired (replicas sharing the file refresh once).
            scheduled_for REAL,
            started_at REAL NOT NULL,
            finished_at REAL NOT NULL,
            succeeded INTEGER NOT NULL,
            error TEXT);
        CREATE INDEX imports_scheduled_for ON imports (scheduled_for) WHERE scheduled_for IS NOT NULL;
        CREATE TABLE import_files (
            import_id INTEGER NOT NULL REFERENCES imports (id) ON DELETE CASCADE, position INTEGER NOT NULL,
            kind TEXT NOT NULL, name TEXT NOT NULL, size_bytes INTEGER NOT NULL, rows_imported INTEGER NOT NULL,
            PRIMARY KEY (import_id, position));
        CREATE TABLE import_skipped_rows (
            import_id INTEGER NOT NULL, file_position INTEGER NOT NULL, position INTEGER NOT NULL,
            row INTEGER NOT NULL, line INTEGER NOT NULL, reason TEXT NOT NULL,
            PRIMARY KEY (import_id, file_position, position),
            FOREIGN KEY (import_id, file_position) REFERENCES import_files (import_id, position) ON DELETE CASCADE);
        -- Which import provided each part of the data, and from which kind of file.
        CREATE TABLE dataset_layers (
            layer TEXT PRIMARY KEY, kind TEXT NOT NULL, import_id INTEGER NOT NULL REFERENCES imports (id));
        """
}

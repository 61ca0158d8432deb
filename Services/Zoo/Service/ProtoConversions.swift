import Foundation
import RPC
import Schema
import ZooAPI
import ZooCore

// Domain values as the zoo's protobuf messages, and back for enums.

extension ZooV1.GeoPoint {
    init(_ point: GeoPoint) { self.init(lat: point.lat, lon: point.lon) }
}

extension ZooV1.AnimalSummary {
    init(_ animal: Animal) {
        self.init(
            id: Int64(animal.id), name: animal.name, latinName: animal.latinName, englishName: animal.englishName,
            className: animal.taxonClass?.czech, location: animal.location, available: animal.isCurrentlyAvailable,
            imageURL: animal.imageURL, imageAlt: animal.imageAlt)
    }
}

extension ZooV1.PlaceKind {
    init(_ kind: PlaceKind?) {
        self =
            switch kind {
            case nil: .point
            case .pen: .pen
            case .house: .house
            case .zooPart: .zooPart
            }
    }
}

extension ZooV1.Destination {
    init(_ destination: Destination) {
        self.init(kind: ZooV1.PlaceKind(destination.kind), name: destination.name, locationID: destination.featureID)
    }
}

extension ZooV1.Unroutable {
    init(_ item: Unroutable) {
        self.init(animalID: Int64(item.animalID ?? 0), name: item.name, reason: item.reason)
    }
}

extension ZooV1.Routability {
    init(_ value: Routability) {
        self.init(
            animals: Int32(clamping: value.animals), routableAnimals: Int32(clamping: value.routableAnimals),
            toPen: Int32(clamping: value.toPen), toHouse: Int32(clamping: value.toHouse),
            toZooPart: Int32(clamping: value.toZooPart),
            houses: Int32(clamping: value.houses), routableHouses: Int32(clamping: value.routableHouses),
            unroutableAnimals: value.unroutableAnimals.map(ZooV1.Unroutable.init),
            unroutableHouses: value.unroutableHouses.map(ZooV1.Unroutable.init))
    }
}

extension ZooV1.Animal {
    /// Every attribute of `animal` as the catalogue holds it, with its map locations and where a walk to it ends.
    init(_ animal: Animal, in catalogue: Catalogue) {
        self.init(animal, locations: catalogue.mapLocations(of: animal))
        let routable = animal.isCurrentlyAvailable ? catalogue.placement(of: animal) : nil
        placeKind = routable.map { ZooV1.PlaceKind($0.kind) } ?? .unspecified
        placeName = routable?.name ?? ""
        if routable == nil {
            unroutableReason =
                animal.isCurrentlyAvailable
                ? (animal.location.map { "nothing places \"\($0)\" on the map" } ?? "no location in either source")
                : "not kept now"
        }
    }

    init(_ animal: Animal, locations: [MapFeature]) {
        self.init(
            id: Int64(animal.id), name: animal.name, latinName: animal.latinName, englishName: animal.englishName,
            taxonClass: animal.taxonClass.map { ZooV1.Taxon(czech: $0.czech, latin: $0.latin) },
            order: animal.order.map { ZooV1.Taxon(czech: $0.czech, latin: $0.latin) }, continents: animal.continents,
            range: animal.range, biotopes: animal.biotopes, biotopeDetail: animal.biotopeDetail, foods: animal.foods,
            foodDetail: animal.foodDetail, description: animal.description, proportions: animal.proportions,
            reproduction: animal.reproduction, interestingFacts: animal.interestingFacts, projects: animal.projects,
            breeding: animal.breeding, location: animal.location, locationURL: animal.locationURL,
            imageURL: animal.imageURL, imageAlt: animal.imageAlt, available: animal.isCurrentlyAvailable,
            adoption: animal.adoption.map {
                ZooV1.Adoption(
                    czechName: $0.czechName, englishName: $0.englishName, className: $0.className,
                    priceCzk: $0.priceCZK.map(Int64.init), visitable: $0.visitable)
            },
            mapLocations: locations.map {
                ZooV1.MapLocation(
                    id: $0.id, name: $0.name, isBuilding: $0.isBuilding, isAnimalPen: $0.isAnimalPen,
                    anchor: ZooV1.GeoPoint($0.anchor), outline: $0.outline.map(ZooV1.GeoPoint.init),
                    singularNames: $0.singularNames ?? [])
            },
            sources: animal.sources.map(ZooV1.FileKind.init), otherNames: animal.otherNames)
    }
}

extension ZooV1.FilterValue {
    init(_ value: FilterValue) { self.init(value: value.value, count: Int32(clamping: value.count)) }
}

extension ZooV1.Route {
    init(_ route: Route) {
        self.init(
            distanceM: route.distanceMeters, durationS: route.durationSeconds, nodeIds: route.nodeIDs,
            coordinates: route.coordinates.map(ZooV1.GeoPoint.init))
    }
}

extension ZooV1.FileKind {
    init(_ kind: ZooFileKind) {
        self =
            switch kind {
            case .lexiconCSV: .lexiconCsv
            case .animalsJSON: .animalsJson
            case .map: .map
            case .bounds: .bounds
            case .adoptions: .adoptions
            case .pavilionFixes: .pavilionFixes
            case .singularPlural: .singularPlural
            }
    }
}

extension ZooFileKind {
    /// The domain kind of a wire value; `nil` for unspecified and unknown values.
    init?(_ kind: ZooV1.FileKind) {
        guard let match = ZooFileKind.allCases.first(where: { ZooV1.FileKind($0) == kind }) else { return nil }
        self = match
    }
}

extension ZooV1.ImportRecord {
    init(_ record: ImportRecord) {
        let trigger: ZooV1.ImportTrigger =
            switch record.trigger {
            case .client: .client
            case .sampleData: .sampleData
            case .schedule: .schedule
            }
        self.init(
            id: record.id, source: record.source, trigger: trigger, startedAt: record.startedAt.timeIntervalSince1970,
            finishedAt: record.finishedAt.timeIntervalSince1970, succeeded: record.succeeded,
            files: record.files.map { file in
                ZooV1.ImportedFile(
                    kind: ZooV1.FileKind(file.kind), name: file.name, sizeBytes: Int64(file.sizeBytes),
                    rowsImported: Int32(clamping: file.rowsImported),
                    skipped: file.skipped.map {
                        ZooV1.SkippedRow(
                            row: Int32(clamping: $0.row), line: Int32(clamping: $0.line), reason: $0.reason)
                    })
            },
            rowsImported: Int32(clamping: record.rowsImported), rowsSkipped: Int32(clamping: record.rowsSkipped),
            error: record.error,
            lexiconMerge: record.lexiconMerge.map { merge in
                ZooV1.LexiconMerge(
                    websiteEntries: Int32(clamping: merge.websiteEntries),
                    lexiconRows: Int32(clamping: merge.lexiconRows),
                    matchedByLatinName: Int32(clamping: merge.matchedByLatinName),
                    matchedByCzechName: Int32(clamping: merge.matchedByCzechName), added: Int32(clamping: merge.added),
                    addedIDBase: Int64(merge.addedIDBase), conflicts: merge.conflicts)
            })
    }
}

extension ZooV1.DataCounts {
    init(_ counts: DataCounts) {
        self.init(
            animals: Int32(clamping: counts.animals), availableAnimals: Int32(clamping: counts.availableAnimals),
            classes: Int32(clamping: counts.classes), orders: Int32(clamping: counts.orders),
            continents: Int32(clamping: counts.continents), biotopes: Int32(clamping: counts.biotopes),
            foods: Int32(clamping: counts.foods), zooHouses: Int32(clamping: counts.zooHouses),
            mapLocations: Int32(clamping: counts.mapLocations), adoptions: Int32(clamping: counts.adoptions),
            footpathNodes: Int32(clamping: counts.footpathNodes), footpathEdges: Int32(clamping: counts.footpathEdges))
    }
}

extension ZooV1.MapTiles {
    init(_ info: MapTilesStore.Info) {
        self.init(sizeBytes: Int64(info.sizeBytes), importedAt: info.importedAt.timeIntervalSince1970)
    }
}

import ArgumentParser
import Foundation
import GatewayKit
import RPC
import Schema
import ZooAPI

/// `gateway zoo search TEXT [--class …] [--food …] [--biotope …] [--house …] [--continent …] [--all]`.
struct ZooSearch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Search animals by Czech, Latin or English name (diacritics and case do not matter), with filters.",
        discussion: """
            Filters are OR within one kind and AND across kinds; `gateway zoo filters` lists their values. \
            With --json: the SearchAnimalsResponse, as protobuf's JSON mapping ({"total": N, "animals": [{"id": "42", "name", \
            "latinName", "className", "location", "available"}, …]}; ids are strings).
            """)

    @Argument(help: "Text to look for (default: none, every animal the filters allow).")
    var text: String = ""

    @Option(name: .customLong("class"), help: "A class, e.g. Savci (repeatable; default: any).")
    var classes: [String] = []

    @Option(name: .customLong("food"), help: "A food (repeatable; default: any).")
    var foods: [String] = []

    @Option(name: .customLong("biotope"), help: "A biotope (repeatable; default: any).")
    var biotopes: [String] = []

    @Option(name: .customLong("house"), help: "A zoo house / pavilion (repeatable; default: any).")
    var houses: [String] = []

    @Option(name: .customLong("continent"), help: "A continent (repeatable; default: any).")
    var continents: [String] = []

    @Flag(help: "Include animals the zoo does not currently keep.")
    var all = false

    @Option(parsing: .unconditional, help: "Results per page (0…500).")
    var limit: Int32 = 20

    @Option(parsing: .unconditional, help: "Results to skip.")
    var offset: Int32 = 0

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withZoo { zoo in
            let request = ZooV1.SearchAnimalsRequest(
                text: text, classes: classes, foods: foods, biotopes: biotopes, zooHouses: houses,
                continents: continents,
                includeUnavailable: all, offset: offset, pageSize: limit)
            let reply = try await zoo.searchAnimals(request, options: global.callOptions)
            try global.render(
                reply,
                text: {
                    printTable(
                        ["ID", "NAME", "LATIN NAME", "CLASS", "LOCATION"],
                        reply.animals.map { animal in
                            [
                                String(animal.id), animal.name + (animal.available ? "" : " (not kept)"),
                                animal.latinName ?? "-",
                                animal.className ?? "-", animal.location ?? "-",
                            ]
                        })
                    print(Self.pageLine(offset: Int(offset), shown: reply.animals.count, total: Int(reply.total)))
                })
        }
    }
}

extension ZooSearch {
    /// The line under a page: "1–20 of 327 animals"; an empty page says "no animals" (with the total when the page
    /// is past the end), not "no 327 animals".
    static func pageLine(offset: Int, shown: Int, total: Int) -> String {
        if shown == 0 {
            return total == 0 ? "no animals" : "no animals at offset \(offset) (\(total) in all)"
        }
        return "\(offset + 1)–\(offset + shown) of \(total) animal\(total == 1 ? "" : "s")"
    }
}

/// `gateway zoo show ID`: every attribute of one animal.
struct ZooShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show every attribute of one animal.",
        discussion: #"With --json: the GetAnimalResponse as protobuf's JSON mapping, {"animal": {every attribute}}."#)

    @Argument(help: "The animal's id.")
    var id: Int64

    func validate() throws { if id < 1 { throw InvalidValue("an animal's id is a number from 1 (got \(id))") } }

    @Flag(help: "Also show an animal the zoo does not currently keep.")
    var all = false

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withZoo { zoo in
            let reply = try await zoo.getAnimal(
                ZooV1.GetAnimalRequest(id: id, includeUnavailable: all), options: global.callOptions)
            guard let animal = reply.animal else {
                throw RPCError(.internalError, "the service answered without the animal")
            }
            try global.render(reply, text: { print(Self.text(animal)) })
        }
    }

    static func text(_ animal: ZooV1.Animal) -> String {
        func taxon(_ value: ZooV1.Taxon?) -> String? { value.map { $0.czech + ($0.latin.map { " (\($0))" } ?? "") } }
        func list(_ values: [String]) -> String? { values.isEmpty ? nil : values.joined(separator: ", ") }
        let adoption = animal.adoption.map { adoption in
            (adoption.priceCzk.map { "\($0) CZK" } ?? "price not given") + (adoption.visitable ? "" : ", not visitable")
        }
        let locations = list(
            animal.mapLocations.map { location in
                location.name + (location.anchor.map { String(format: " (%.5f,%.5f)", $0.lat, $0.lon) } ?? "")
            })
        let fields: [(String, String?)] = [
            ("Id", String(animal.id)), ("Also called", list(animal.otherNames)), ("English", animal.englishName),
            ("Class", taxon(animal.taxonClass)),
            ("Order", taxon(animal.order)), ("Kept now", animal.available ? "yes" : "no"),
            ("Location", animal.location),
            ("Location page", animal.locationURL), ("Map locations", locations),
            ("Continents", list(animal.continents)),
            ("Range", animal.range), ("Biotopes", list(animal.biotopes)), ("Biotope", animal.biotopeDetail),
            ("Food", list(animal.foods)), ("Diet", animal.foodDetail), ("Proportions", animal.proportions),
            ("Reproduction", animal.reproduction), ("Adoption", adoption), ("Image", animal.imageURL),
            ("Description", animal.description), ("Interesting facts", animal.interestingFacts),
            ("Projects", animal.projects), ("Breeding in Prague", animal.breeding),
            ("Sources", list(animal.sources.compactMap(ZooFormat.fileKindName))),
            (
                "Walk to",
                animal.placeKind == .unspecified
                    ? animal.unroutableReason.map { "nowhere: \($0)" }
                    : ZooFormat.destination(animal.placeKind, animal.placeName)
            ),
        ]
        let title = animal.name + (animal.latinName.map { " (\($0))" } ?? "")
        return ([title] + fields.compactMap { label, value in value.map { "\(label): \($0)" } }).joined(separator: "\n")
    }
}

/// `gateway zoo filters`: each filter kind's values with counts.
struct ZooFilters: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "filters",
        abstract:
            "List the values of each filter (class, food, biotope, house, continent) with how many animals have each.",
        discussion:
            #"With --json: the ListFilterValuesResponse, {"classes": [{"value", "count"}, …], "foods", "biotopes", "zooHouses", "continents"}."#
    )

    @Flag(help: "Count animals the zoo does not currently keep too.")
    var all = false

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await global.withZoo { zoo in
            let reply = try await zoo.listFilterValues(
                ZooV1.ListFilterValuesRequest(includeUnavailable: all), options: global.callOptions)
            let kinds: [(String, String, [ZooV1.FilterValue])] = [
                ("classes", "--class", reply.classes), ("foods", "--food", reply.foods),
                ("biotopes", "--biotope", reply.biotopes),
                ("zoo_houses", "--house", reply.zooHouses), ("continents", "--continent", reply.continents),
            ]
            try global.render(
                reply,
                text: {
                    for (index, (_, option, values)) in kinds.enumerated() {
                        if index > 0 { print("") }
                        printTable(
                            [option.uppercased().replacingOccurrences(of: "-", with: ""), "ANIMALS"],
                            values.map { [$0.value, String($0.count)] })
                    }
                })
        }
    }
}

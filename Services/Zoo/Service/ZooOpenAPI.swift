import HTTP
import Schema

/// `/api/openapi.json` (OpenAPI 3.1 describing `ZooRestAPI`'s routes) and `/docs`, a self-contained page
/// of it (no script, no CDN), both made from the route table's bindings (what is served is what is described; a
/// binding without a description here stops the server at its start) and the descriptions below.
enum ZooOpenAPI {
    struct Operation {
        var path: String
        var summary: String
        var description: String
        var parameters: [(name: String, location: String, type: String, description: String)] = []
        var responses: [(status: String, description: String)]
        var contentType = "application/json"
    }

    static let envelope = "`{\"metadata\": {\"last_update_start\", \"last_update_end\", \"next_update\"}, \"data\": …}`"

    static let operations: [Operation] = [
        Operation(
            path: "/api/animals", summary: "Every animal",
            description:
                "The animals currently kept (all of them with include_currently_unavailable=true), with animals.json's fields (`_id`, `name`, `latin_name`, `class_`, `map_locations` with `[lon, lat]` outlines, …), in \(envelope).",
            parameters: [
                (
                    "include_currently_unavailable", "query", "boolean",
                    "also the animals not currently kept (default false)"
                )
            ],
            responses: [
                ("200", "the animals"), ("304", "not modified since the ETag given"),
                ("422", "a bad parameter, `{\"detail\": …}`"),
            ]),
        Operation(
            path: "/api/animals/{id}", summary: "One animal",
            description:
                "The animal `id` (currently kept, or any with include_currently_unavailable=true) as a list of one in \(envelope).",
            parameters: [
                ("id", "path", "integer", "the animal's id (`_id`)"),
                (
                    "include_currently_unavailable", "query", "boolean",
                    "also an animal not currently kept (default false)"
                ),
            ],
            responses: [
                ("200", "the animal, `data: [animal]`"), ("304", "not modified since the ETag given"),
                ("404", "`{\"detail\": \"Item not found\"}`: unknown or not currently kept"),
                ("422", "an id that is no integer, a bad parameter"),
            ]),
        Operation(
            path: "/api/classes", summary: "Classes",
            description: "The animal classes (Czech names) of the animals kept, in \(envelope).",
            responses: [("200", "the classes"), ("304", "not modified")]),
        Operation(
            path: "/api/biotops", summary: "Biotopes", description: "The biotopes of the animals kept, in \(envelope).",
            responses: [("200", "the biotopes"), ("304", "not modified")]),
        Operation(
            path: "/api/foods", summary: "Foods", description: "The foods of the animals kept, in \(envelope).",
            responses: [("200", "the foods"), ("304", "not modified")]),
        Operation(
            path: "/api/zooHouses", summary: "Zoo houses",
            description: "The zoo's houses (pavilions) and parts that animals live in, in \(envelope).",
            responses: [("200", "the houses"), ("304", "not modified")]),
        Operation(
            path: "/api/map/metadata", summary: "Footpath graph",
            description:
                "The zoo's footpaths as map-metadata.json: `{\"metadata\": …, \"nodes\": [{\"_id\", \"lon\", \"lat\", \"road_ids\", \"is_connector\"}], \"roads\": [{\"_id\", \"type\": \"Feature\", \"geometry\": {\"type\": \"LineString\", \"coordinates\": [node objects in walking order]}, \"properties\": null}]}`.",
            responses: [("200", "the graph"), ("304", "not modified")]),
        Operation(
            path: "/api/map/data", summary: "Map tiles",
            description:
                "The MBTiles file of the zoo map imported with `gateway zoo import --tiles FILE`, as an attachment (`zoo.mbtiles`), tagged with a hash of its bytes, not compressed.",
            responses: [
                ("200", "the MBTiles (SQLite) file"), ("304", "not modified"),
                ("404", "no tiles were imported: `{\"detail\": …}`"),
            ],
            contentType: "application/vnd.sqlite3"),
        Operation(
            path: "/api/openapi.json", summary: "This description",
            description: "The OpenAPI 3.1 document of these routes.",
            responses: [("200", "the document")]),
        Operation(
            path: "/docs", summary: "API documentation", description: "This description as a web page.",
            responses: [("200", "the page")], contentType: "text/html"),
    ]

    /// The descriptions of `bindings`, in their order; each must have one.
    static func operations(of bindings: [HTTPBinding]) -> [(HTTPBinding, Operation)] {
        bindings.map { binding in
            guard let operation = operations.first(where: { $0.path == binding.path }) else {
                preconditionFailure("the zoo's route \(binding.path) has no OpenAPI description")
            }
            return (binding, operation)
        }
    }

    static func document(_ bindings: [HTTPBinding]) -> [UInt8] {
        var paths: [JSONMember] = []
        for (binding, operation) in operations(of: bindings) {
            let parameters: [JSONValue] = operation.parameters.map { parameter in
                .object([
                    JSONMember("name", .string(parameter.name)), JSONMember("in", .string(parameter.location)),
                    JSONMember("required", .bool(parameter.location == "path")),
                    JSONMember("description", .string(parameter.description)),
                    JSONMember("schema", .object([JSONMember("type", .string(parameter.type))])),
                ])
            }
            let responses = operation.responses.map { response in
                var members = [JSONMember("description", .string(response.description))]
                if response.status.hasPrefix("2") {
                    members.append(JSONMember("content", .object([JSONMember(operation.contentType, .object([]))])))
                }
                return JSONMember(response.status, .object(members))
            }
            var members = [
                JSONMember("summary", .string(operation.summary)),
                JSONMember("description", .string(operation.description)),
                JSONMember("operationId", .string("get" + operation.path.filter { $0.isLetter || $0.isNumber })),
                JSONMember("parameters", .array(parameters)), JSONMember("responses", .object(responses)),
            ]
            // The RPC the route is bound to: its access rule applies, and `gateway stats` counts the route as `GET <path>`.
            if let method = binding.method { members.append(JSONMember("x-rpc-method", .string(method))) }
            let get = JSONValue.object(members)
            paths.append(JSONMember(operation.path, .object([JSONMember("get", get)])))
        }
        let document = JSONValue.object([
            JSONMember("openapi", .string("3.1.0")),
            JSONMember(
                "info",
                .object([
                    JSONMember("title", .string("Menagerie zoo: the zoo app's REST API")),
                    JSONMember("version", .string("1")),
                    JSONMember(
                        "description",
                        .string(
                            "The Prague Zoo app's routes, answered by Menagerie's zoo service in the app's shapes. The service's RPCs are also served over HTTP as Connect calls (POST /menagerie.zoo.v1.Zoo/<Method>)."
                        )),
                ])),
            JSONMember("paths", .object(paths)),
        ])
        return Array(document.serialized(.pretty).utf8)
    }

    static func page(_ bindings: [HTTPBinding]) -> [UInt8] {
        func escape(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;")
        }
        /// `code` spans of the descriptions become <code>.
        func prose(_ text: String) -> String {
            escape(text).split(separator: "`", omittingEmptySubsequences: false).enumerated()
                .map { $0.offset % 2 == 1 ? "<code>\($0.element)</code>" : String($0.element) }.joined()
        }
        var html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
            <title>Menagerie zoo API</title><style>
            body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}
            h2{font-size:1.1rem;margin-top:2rem}h2 .m{background:#2a6;color:#fff;border-radius:4px;padding:0 .4rem;margin-right:.5rem;font-size:.9rem}
            code{background:#f3f3f3;padding:0 .2rem;border-radius:3px}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
            </style></head><body><h1>Menagerie zoo API</h1>
            <p>The Prague Zoo app's REST routes, answered by Menagerie's zoo service in the app's shapes. Lists come in
            <code>{"metadata": {"last_update_start", "last_update_end", "next_update"}, "data": …}</code>; answers carry an
            <code>ETag</code> (send <code>If-None-Match</code> for a 304) and are gzipped when asked. Machine-readable:
            <a href="/api/openapi.json">/api/openapi.json</a>.</p>

            """
        for (_, operation) in operations(of: bindings) {
            html +=
                "<h2 id=\"\(escape(operation.path))\"><span class=\"m\">GET</span><code>\(escape(operation.path))</code> — \(escape(operation.summary))</h2>\n"
            html += "<p>\(prose(operation.description))</p>\n"
            if !operation.parameters.isEmpty {
                html += "<table><tr><th>parameter</th><th>in</th><th>type</th><th>meaning</th></tr>"
                for parameter in operation.parameters {
                    html +=
                        "<tr><td><code>\(escape(parameter.name))</code></td><td>\(parameter.location)</td><td>\(parameter.type)</td><td>\(escape(parameter.description))</td></tr>"
                }
                html += "</table>\n"
            }
            html += "<table><tr><th>status</th><th>meaning</th></tr>"
            for response in operation.responses {
                html += "<tr><td>\(response.status)</td><td>\(prose(response.description))</td></tr>"
            }
            html += "</table>\n"
        }
        html += "</body></html>\n"
        return Array(html.utf8)
    }

    static let documentBinding = HTTPBinding("/api/openapi.json")
    static let pageBinding = HTTPBinding("/docs")

    /// Adds the description's two routes to `routes`, describing every binding registered before them and themselves.
    static func register(in routes: inout HTTPRoutes.Builder) {
        let bindings = routes.bindings + [documentBinding, pageBinding]
        let document = CachedBody(document(bindings), contentType: "application/json")
        let page = CachedBody(page(bindings), contentType: "text/html; charset=utf-8")
        routes.bind(documentBinding) { document.response(to: $0) }
        routes.bind(pageBinding) { page.response(to: $0) }
    }
}

import Foundation

/// A plain HTTP GET handler: the request in, the response out. Runs on the server's workers, as a
/// call's handler does, so it may compute (and suspend) without holding the event loop. It fails by
/// throwing, as a call's handler does (a `CategorizedError`): the server answers the failure in the
/// routes' REST style (`HTTPRoutes.problem`), by the error's category.
public typealias HTTPRouteHandler = @Sendable (HTTPRequest) async throws -> HTTPResponse

/// Renders a failed route's answer: the HTTP status its error's category maps to and the message
/// a caller may read.
public typealias HTTPProblemRenderer = @Sendable (_ status: Int, _ message: String) -> HTTPResponse

/// A GET route declared as a binding, in the spirit of `google.api.http`: its path pattern and the RPC
/// method it answers for, if any. A bound route runs as a call of the server — guarded as that method
/// (its access rule), under a deadline, counted in the stats under `name` — so the REST face is no second
/// API with its own rules. A route-only binding (no method: a file download, an unpaged list) is guarded
/// and counted under its name.
public struct HTTPBinding: Sendable, Hashable {
    /// The path pattern, `/api/animals/{id}`: a last segment `{name}` matches any rest of the path.
    public let path: String
    /// The RPC method whose access rule the route obeys (`/menagerie.zoo.v1.Zoo/GetAnimal`); nil: route-only.
    public let method: String?

    public init(_ path: String, binds method: String? = nil) {
        precondition(path.hasPrefix("/"), "a route's path starts with /")
        precondition(
            !path.dropLast().contains("{") || Self.prefix(of: path) != nil,
            "only a route's last segment may be {a parameter}")
        self.path = path
        self.method = method
    }

    /// What the stats count it under: `GET /api/animals/{id}` (HEAD is counted with GET).
    public var name: String { "GET " + path }

    /// The method a call guard is asked about: the bound method, else the route's name.
    public var guardedAs: String { method ?? name }

    /// The path up to a last `{parameter}` segment (`/api/animals/`); nil for an exact path.
    var prefix: String? { Self.prefix(of: path) }

    private static func prefix(of path: String) -> String? {
        guard path.hasSuffix("}"), let open = path.lastIndex(of: "{"), path[..<open].hasSuffix("/"),
            !path[path.index(after: open)...].dropLast().contains(where: { $0 == "/" || $0 == "{" || $0 == "}" })
        else { return nil }
        return String(path[..<open])
    }
}

/// The plain HTTP routes a service serves beside the Connect protocol on the same port: GET (and HEAD)
/// handlers declared as bindings (`HTTPBinding`), by exact path or by a last `{parameter}` segment
/// (`/api/animals/{id}`), then a directory of static files at `/`. A request none matches is left to
/// Connect (or answered 404 by the server). Built once before serving; read-only afterwards, so any
/// thread may match.
public final class HTTPRoutes: Sendable {
    /// What answers one route: its binding (what it is guarded and counted as) and its handler.
    public struct Route: Sendable {
        public let binding: HTTPBinding
        public let handler: HTTPRouteHandler
        /// Its index in `all`, where the server keeps its per-route state (stats, worker time).
        public let id: Int
    }

    private let exact: [String: Route]
    private let prefixes: [(prefix: String, route: Route)]
    /// Static files served at `/` (nil: none).
    public let staticFiles: StaticFiles?
    /// The static files' route, counted as `GET /{file}`.
    private let filesRoute: Route?
    /// Every route, by `Route.id`: the registered ones in order, then the static files'.
    public let all: [Route]
    /// How a failed route answers (FastAPI's `{"detail": …}` unless the builder says otherwise).
    public let problem: HTTPProblemRenderer

    /// The routes of `builder`'s registrations.
    public init(_ builder: Builder) {
        var exact: [String: Route] = [:]
        var prefixes: [(String, Route)] = []
        var all: [Route] = []
        for (index, registration) in builder.registrations.enumerated() {
            let route = Route(binding: registration.binding, handler: registration.handler, id: index)
            all.append(route)
            if let prefix = registration.binding.prefix {
                prefixes.append((prefix, route))
            } else {
                exact[registration.binding.path] = route
            }
        }
        // Longest prefix first, so `/api/animals/` wins over `/api/`.
        self.exact = exact
        self.prefixes = prefixes.sorted { $0.0.count > $1.0.count }
        staticFiles = builder.staticFiles
        filesRoute = builder.staticFiles.map { files in
            Route(binding: HTTPBinding("/{file}"), handler: { request in files.response(to: request) }, id: all.count)
        }
        self.all = all + (filesRoute.map { [$0] } ?? [])
        problem = builder.problem
    }

    /// Routes registered one by one.
    public struct Builder: Sendable {
        fileprivate var registrations: [(binding: HTTPBinding, handler: HTTPRouteHandler)] = []
        fileprivate var staticFiles: StaticFiles?
        /// How a failed route answers: FastAPI's `{"detail": …}` by default.
        public var problem: HTTPProblemRenderer = RESTProblem.detail

        public init() {}

        /// Answers GET (and HEAD) of `binding`'s path with `handler`.
        public mutating func bind(_ binding: HTTPBinding, _ handler: @escaping HTTPRouteHandler) {
            precondition(!registrations.contains { $0.binding.path == binding.path }, "\(binding.path) is bound twice")
            registrations.append((binding, handler))
        }

        /// GET `path` exactly (without its query): a route-only binding.
        public mutating func get(_ path: String, _ handler: @escaping HTTPRouteHandler) {
            bind(HTTPBinding(path), handler)
        }

        /// GET any path that starts with `prefix` (ending with `/`: the rest is the handler's to read): a route-only
        /// binding of `prefix{path}`.
        public mutating func get(prefix: String, _ handler: @escaping HTTPRouteHandler) {
            precondition(prefix.hasPrefix("/") && prefix.hasSuffix("/"), "a route prefix starts and ends with /")
            bind(HTTPBinding(prefix + "{path}"), handler)
        }

        /// Serves the files under `directory` at `/` (`/` itself is `index.html`).
        public mutating func serveFiles(_ files: StaticFiles) {
            staticFiles = files
        }

        /// The bindings registered so far, in order (what an API description is made from).
        public var bindings: [HTTPBinding] { registrations.map(\.binding) }
    }

    /// Number of routes, the static files' included (the server keeps per-route state by `Route.id`).
    public var count: Int { all.count }

    /// The route answering `request` (GET and HEAD only; the static files are the last resort).
    public func route(for request: HTTPRequest) -> Route? {
        guard request.method == "GET" || request.method == "HEAD" else { return nil }
        let path = String(request.path)
        if let route = exact[path] { return route }
        if let match = prefixes.first(where: { path.hasPrefix($0.prefix) }) { return match.route }
        if let filesRoute, let staticFiles, staticFiles.hasFile(at: path) { return filesRoute }
        return nil
    }
}

/// REST error bodies.
public enum RESTProblem {
    /// FastAPI's error body, `{"detail": "…"}`, as JSON.
    public static let detail: HTTPProblemRenderer = { status, message in
        var text = "{\"detail\":\""
        for scalar in message.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case _ where scalar.value < 0x20: text += String(format: "\\u%04x", scalar.value)
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\"}"
        return HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Array(text.utf8))
    }
}

/// An answer to a GET built once and served many times: its bytes, their gzip and their entity tag,
/// so a 2 MB catalogue is neither serialized nor compressed per request.
public struct CachedBody: Sendable {
    public let body: [UInt8]
    public let contentType: String
    public let entityTag: String
    /// The body gzipped (nil when too small to be worth it).
    public let gzipped: [UInt8]?

    /// Answers smaller than this are not worth compressing.
    public static var compressionThreshold: Int { 1024 }

    /// `body`, tagged with `entityTag` (default: a hash of the bytes), gzipped once if large enough.
    public init(_ body: [UInt8], contentType: String, entityTag: String? = nil) {
        self.body = body
        self.contentType = contentType
        self.entityTag = entityTag ?? EntityTag.strong(body)
        gzipped = body.count >= Self.compressionThreshold ? Gzip.compress(body) : nil
    }

    /// `body` as `request` gets it, made once for it: tagged, 304 when its `If-None-Match` matches, gzipped when
    /// it accepts gzip (a server's answer cache keeps the answer per way of asking).
    public static func response(_ body: [UInt8], contentType: String, to request: HTTPRequest) -> HTTPResponse {
        let entityTag = EntityTag.strong(body)
        var headers: HTTPHeaders = [
            "Content-Type": contentType, "ETag": entityTag, "Cache-Control": "no-cache", "Vary": "Accept-Encoding",
        ]
        if let ifNoneMatch = request.headers["if-none-match"], EntityTag.matches(ifNoneMatch, entityTag) {
            return HTTPResponse(status: 304, headers: headers)
        }
        if body.count >= compressionThreshold, request.acceptsGzip {
            headers.add("Content-Encoding", "gzip")
            return HTTPResponse(status: 200, headers: headers, body: Gzip.compress(body))
        }
        return HTTPResponse(status: 200, headers: headers, body: body)
    }

    /// The answer to `request`: 304 when its `If-None-Match` matches, gzip when it accepts it;
    /// `cacheControl` as given (revalidate by default: the data change when an import lands).
    public func response(to request: HTTPRequest, status: Int = 200, cacheControl: String = "no-cache") -> HTTPResponse
    {
        var headers: HTTPHeaders = [
            "Content-Type": contentType, "ETag": entityTag, "Cache-Control": cacheControl, "Vary": "Accept-Encoding",
        ]
        if let ifNoneMatch = request.headers["if-none-match"], EntityTag.matches(ifNoneMatch, entityTag) {
            return HTTPResponse(status: 304, headers: headers)
        }
        if let gzipped, request.acceptsGzip {
            headers.add("Content-Encoding", "gzip")
            return HTTPResponse(status: status, headers: headers, body: gzipped)
        }
        return HTTPResponse(status: status, headers: headers, body: body)
    }
}

/// HTTP entity tags (RFC 9110 §8.8.3), shared by Connect's GETs and the plain routes.
public enum EntityTag {
    /// A strong validator of `body`: a hash of its bytes (FNV-1a, 64 bits) and its length, so equal
    /// answers of any replica carry equal tags.
    public static func strong(_ body: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        let hex = String(hash, radix: 16)
        return "\"" + String(repeating: "0", count: 16 - hex.count) + hex + "-\(body.count)\""
    }

    /// Whether `If-None-Match: header` matches `tag` (a list, `*`, weak tags compared weakly).
    public static func matches(_ header: String, _ tag: String) -> Bool {
        header.split(separator: ",").contains { candidate in
            let candidate = candidate.trimmingASCIIWhitespace()
            return candidate == "*" || candidate == tag || candidate == "W/" + tag
        }
    }
}

extension HTTPRequest {
    /// Whether `Accept-Encoding` lists gzip (without `q=0`).
    public var acceptsGzip: Bool {
        headers.values("accept-encoding").flatMap { $0.split(separator: ",") }.contains { coding in
            let parts = coding.split(separator: ";").map { $0.trimmingASCIIWhitespace().lowercased() }
            return parts.first == "gzip"
                && !parts.dropFirst().contains { $0 == "q=0" || $0 == "q=0.0" || $0 == "q=0.00" || $0 == "q=0.000" }
        }
    }
}

/// Files under one directory served read-only at `/`: `Content-Type` by extension, an ETag of the
/// bytes with 304s, gzip when accepted. The files are read once and kept (a web page's few files),
/// so a request never touches the disk and no path can leave the directory: only names found when
/// the directory was read are served.
public final class StaticFiles: Sendable {
    private let files: [String: CachedBody]

    /// Reads every regular file under `directory` (hidden files and links out of it are skipped);
    /// throws when it is not a directory.
    public init(directory: URL) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue
        else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: directory.path])
        }
        var files: [String: CachedBody] = [:]
        let root = directory.standardizedFileURL.resolvingSymlinksInPath()
        let enumerator = FileManager.default.enumerator(
            at: root, includingPropertiesForKeys: [.isRegularFileKey], options: [.skipsHiddenFiles])
        while let url = enumerator?.nextObject() as? URL {
            let resolved = url.resolvingSymlinksInPath()
            guard (try? resolved.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true,
                resolved.path.hasPrefix(root.path + "/")
            else { continue }
            let relative = String(resolved.path.dropFirst(root.path.count))
            let bytes = try [UInt8](Data(contentsOf: resolved))
            files[relative] = CachedBody(bytes, contentType: Self.contentType(of: relative))
        }
        self.files = files
    }

    /// The paths served, `/index.html` style.
    public var paths: [String] { files.keys.sorted() }

    private func key(_ path: String) -> String { path.hasSuffix("/") ? path + "index.html" : path }

    public func hasFile(at path: String) -> Bool { files[key(path)] != nil }

    public func response(to request: HTTPRequest) -> HTTPResponse {
        guard let file = files[key(String(request.path))] else { return .text(404, "no such file") }
        return file.response(to: request)
    }

    static func contentType(of path: String) -> String {
        switch (path as NSString).pathExtension.lowercased() {
        case "html", "htm": "text/html; charset=utf-8"
        case "css": "text/css; charset=utf-8"
        case "js", "mjs": "text/javascript; charset=utf-8"
        case "json": "application/json"
        case "svg": "image/svg+xml"
        case "png": "image/png"
        case "jpg", "jpeg": "image/jpeg"
        case "ico": "image/x-icon"
        case "txt": "text/plain; charset=utf-8"
        case "webmanifest": "application/manifest+json"
        default: "application/octet-stream"
        }
    }
}

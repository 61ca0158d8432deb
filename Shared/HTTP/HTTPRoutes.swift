import Foundation

/// A plain HTTP GET handler: the request in, the response out. Runs on the server's workers, as a
/// call's handler does, so it may compute (and suspend) without holding the event loop.
public typealias HTTPRouteHandler = @Sendable (HTTPRequest) async -> HTTPResponse

/// The plain HTTP routes a service serves beside the Connect protocol on the same port: GET
/// handlers by exact path or by path prefix (`/api/animals/` for `/api/animals/{id}`), then a
/// directory of static files at `/`. A request none matches is left to Connect (or answered 404
/// by the server). Built once before serving; read-only afterwards, so any thread may match.
public final class HTTPRoutes: Sendable {
    /// What answers one route, and how long its answers have held a worker (measured by the pool).
    public struct Route: Sendable {
        public let handler: HTTPRouteHandler
        /// Opaque per-route state the server keeps (its worker-time measure); set by the server's side.
        public let id: Int
    }

    private let exact: [String: Route]
    private let prefixes: [(prefix: String, route: Route)]
    /// Static files served at `/` (nil: none).
    public let staticFiles: StaticFiles?

    /// The routes of `builder`'s registrations.
    public init(_ builder: Builder) {
        var exact: [String: Route] = [:]
        var prefixes: [(String, Route)] = []
        for (index, registration) in builder.registrations.enumerated() {
            let route = Route(handler: registration.handler, id: index)
            if registration.isPrefix { prefixes.append((registration.path, route)) } else { exact[registration.path] = route }
        }
        // Longest prefix first, so `/api/animals/` wins over `/api/`.
        self.exact = exact
        self.prefixes = prefixes.sorted { $0.0.count > $1.0.count }
        staticFiles = builder.staticFiles
    }

    /// Routes registered one by one.
    public struct Builder: Sendable {
        fileprivate var registrations: [(path: String, isPrefix: Bool, handler: HTTPRouteHandler)] = []
        fileprivate var staticFiles: StaticFiles?

        public init() {}

        /// GET `path` exactly (without its query).
        public mutating func get(_ path: String, _ handler: @escaping HTTPRouteHandler) {
            precondition(path.hasPrefix("/"), "a route's path starts with /")
            registrations.append((path, false, handler))
        }

        /// GET any path that starts with `prefix` (ending with `/`: the rest is the handler's to read).
        public mutating func get(prefix: String, _ handler: @escaping HTTPRouteHandler) {
            precondition(prefix.hasPrefix("/") && prefix.hasSuffix("/"), "a route prefix starts and ends with /")
            registrations.append((prefix, true, handler))
        }

        /// Serves the files under `directory` at `/` (`/` itself is `index.html`).
        public mutating func serveFiles(_ files: StaticFiles) {
            staticFiles = files
        }
    }

    /// Number of routes (the server measures each one's worker time by `Route.id`).
    public var count: Int { exact.count + prefixes.count }

    /// The route answering `request` (GET only; the static files are the last resort).
    public func route(for request: HTTPRequest) -> Route? {
        guard request.method == "GET" else { return nil }
        let path = String(request.path)
        if let route = exact[path] { return route }
        if let match = prefixes.first(where: { path.hasPrefix($0.prefix) }) { return match.route }
        if let staticFiles, staticFiles.hasFile(at: path) {
            return Route(handler: { request in staticFiles.response(to: request) }, id: count)
        }
        return nil
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

    /// The answer to `request`: 304 when its `If-None-Match` matches, gzip when it accepts it;
    /// `cacheControl` as given (revalidate by default: the data change when an import lands).
    public func response(to request: HTTPRequest, status: Int = 200, cacheControl: String = "no-cache") -> HTTPResponse {
        var headers: HTTPHeaders = ["Content-Type": contentType, "ETag": entityTag, "Cache-Control": cacheControl, "Vary": "Accept-Encoding"]
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
            return parts.first == "gzip" && !parts.dropFirst().contains { $0 == "q=0" || $0 == "q=0.0" || $0 == "q=0.00" || $0 == "q=0.000" }
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
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: directory.path])
        }
        var files: [String: CachedBody] = [:]
        let root = directory.standardizedFileURL.resolvingSymlinksInPath()
        let enumerator = FileManager.default.enumerator(
            at: root, includingPropertiesForKeys: [.isRegularFileKey], options: [.skipsHiddenFiles])
        while let url = enumerator?.nextObject() as? URL {
            let resolved = url.resolvingSymlinksInPath()
            guard (try? resolved.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true,
                  resolved.path.hasPrefix(root.path + "/") else { continue }
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

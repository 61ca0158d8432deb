import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where a scheduled refresh fetches data: a file, a directory of the open data's files, or an http(s) URL.
///
/// Written `[KIND=]LOCATION`; without a kind, the file name tells it (`lexikon-zvirat.csv`, `animals.json`,
/// `map-metadata.json`, `map-bounds.json`, `adopce-zvirat.csv`, `zoo-parts-fixes.csv`, `singular-plural.csv`).
/// Kinds are written as `ZooFileKind` raw values: `lexicon_csv=https://example.org/lexicon.csv`.
public enum RefreshSource: Sendable, Equatable, CustomStringConvertible {
    case file(ZooFileKind, path: String)
    /// Every file of the open data's names found in the directory when the refresh runs.
    case directory(path: String)
    case url(ZooFileKind, URL)

    /// Files larger than this are refused.
    public static let maxSize = 64 << 20

    public init(parsing spec: String) throws(ZooError) {
        var location = spec.trimmingCharacters(in: .whitespaces)
        var kind: ZooFileKind?
        if let equals = location.firstIndex(of: "="), let given = ZooFileKind(rawValue: String(location[..<equals])) {
            kind = given
            location = String(location[location.index(after: equals)...])
        }
        guard !location.isEmpty else { throw .invalidArgument("refresh source \"\(spec)\" names no file or URL") }
        if location.hasPrefix("http://") || location.hasPrefix("https://") {
            guard let url = URL(string: location), url.host != nil else {
                throw .invalidArgument("refresh source \"\(spec)\" is not a valid URL")
            }
            guard let kind = kind ?? ZooFileKind(fileName: url.lastPathComponent) else {
                throw .invalidArgument(
                    "cannot tell what \(location) holds from its name; write KIND=\(location) with KIND one of \(Self.kindNames)"
                )
            }
            self = .url(kind, url)
            return
        }
        if location.contains("://") {
            throw .invalidArgument("refresh source \"\(spec)\": only file paths and http(s) URLs are supported")
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: location, isDirectory: &isDirectory), isDirectory.boolValue {
            guard kind == nil else { throw .invalidArgument("refresh source \"\(spec)\": a directory takes no kind") }
            self = .directory(path: location)
            return
        }
        guard let kind = kind ?? ZooFileKind(fileName: URL(fileURLWithPath: location).lastPathComponent) else {
            throw .invalidArgument(
                "cannot tell what \(location) holds from its name; write KIND=\(location) with KIND one of \(Self.kindNames)"
            )
        }
        self = .file(kind, path: location)
    }

    private static var kindNames: String { ZooFileKind.allCases.map(\.rawValue).joined(separator: ", ") }

    public var description: String {
        switch self {
        case .file(let kind, let path): "\(kind.rawValue)=\(path)"
        case .directory(let path): path
        case .url(let kind, let url): "\(kind.rawValue)=\(url.absoluteString)"
        }
    }

    /// Reads or downloads the source's files.
    public func fetch() async throws -> [ZooSourceFile] {
        switch self {
        case .file(let kind, let path):
            let url = URL(fileURLWithPath: path)
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            guard size <= Self.maxSize else {
                throw ZooError.importFailed(source: path, reason: "larger than \(Self.maxSize) bytes")
            }
            do {
                return [ZooSourceFile(kind: kind, name: path, content: try Data(contentsOf: url))]
            } catch {
                throw ZooError.importFailed(source: path, reason: error.localizedDescription)
            }
        case .directory(let path):
            return try ZooSourceFile.directory(URL(fileURLWithPath: path))
        case .url(let kind, let url):
            return [ZooSourceFile(kind: kind, name: url.absoluteString, content: try await Self.download(url))]
        }
    }

    /// GETs `url` with URLSession; anything but a 2xx answer is an error.
    static func download(_ url: URL) async throws -> Data {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 60)
        request.httpMethod = "GET"
        let (data, response): (Data, URLResponse) = try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.dataTask(with: request) { data, response, error in
                if let data, let response {
                    continuation.resume(returning: (data, response))
                } else {
                    continuation.resume(
                        throwing: ZooError.importFailed(
                            source: url.absoluteString, reason: error?.localizedDescription ?? "no response"))
                }
            }.resume()
        }
        guard let status = (response as? HTTPURLResponse)?.statusCode, (200..<300).contains(status) else {
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            throw ZooError.importFailed(source: url.absoluteString, reason: "the server answered HTTP \(status)")
        }
        guard data.count <= maxSize else {
            throw ZooError.importFailed(source: url.absoluteString, reason: "larger than \(maxSize) bytes")
        }
        return data
    }
}

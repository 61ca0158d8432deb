/// Domain errors of the zoo core. `kind` tells the service layer which status to answer with.
public enum ZooError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No animal with this id (or it is not currently kept and the caller did not ask for those).
    case unknownAnimal(id: Int)
    /// No pavilion (zoo house) of this name on the map.
    case unknownPavilion(String)
    /// Latitude/longitude that are not numbers or outside their ranges.
    case malformedCoordinate(lat: Double, lon: Double)
    /// A valid coordinate outside the zoo map.
    case outOfRange(GeoPoint)
    /// The animal has no map location to route to or from.
    case noMapLocation(animalID: Int, name: String)
    /// The footpath graph has no path between the two ends.
    case noPath(String)
    /// A request value that makes no sense (negative radius, empty tour…).
    case invalidArgument(String)
    /// A source file could not be imported at all.
    case importFailed(source: String, reason: String)

    /// Coarse category, mapped one-to-one onto RPC status codes by the service layer.
    public enum Kind: Sendable, Equatable { case notFound, invalidArgument, outOfRange, failedPrecondition }

    public var kind: Kind {
        switch self {
        case .unknownAnimal, .unknownPavilion, .noPath: .notFound
        case .malformedCoordinate, .invalidArgument, .importFailed: .invalidArgument
        case .outOfRange: .outOfRange
        case .noMapLocation: .failedPrecondition
        }
    }

    public var description: String {
        switch self {
        case .unknownAnimal(let id): "no animal with id \(id)"
        case .unknownPavilion(let name): "no pavilion named \"\(name)\" on the map"
        case .malformedCoordinate(let lat, let lon): "malformed coordinate (\(lat), \(lon))"
        case .outOfRange(let point): "point (\(point.lat), \(point.lon)) is outside the zoo map"
        case .noMapLocation(let id, let name): "animal \(id) \"\(name)\" has no location on the map"
        case .noPath(let what): "no footpath route \(what)"
        case .invalidArgument(let message): message
        case .importFailed(let source, let reason): "cannot import \(source): \(reason)"
        }
    }
}

import Base

/// A failure of the zoo domain: its category (the status a caller gets) and a message for the person who sent
/// the request. The same shape as every service's domain error; the constructors below are the zoo's cases.
public struct ZooError: CategorizedError, Equatable, CustomStringConvertible {
    public let category: ErrorCategory
    public let message: String

    public init(_ category: ErrorCategory, _ message: String) {
        self.category = category
        self.message = message
    }

    /// No animal with this id (or it is not currently kept and the caller did not ask for those).
    public static func unknownAnimal(id: Int) -> ZooError { ZooError(.notFound, "no animal with id \(id)") }

    /// No pavilion (zoo house) of this name on the map.
    public static func unknownPavilion(_ name: String) -> ZooError {
        ZooError(.notFound, "no pavilion named \"\(name)\" on the map")
    }

    /// Latitude/longitude that are not numbers or outside their ranges.
    public static func malformedCoordinate(lat: Double, lon: Double) -> ZooError {
        ZooError(.invalidArgument, "malformed coordinate (\(lat), \(lon))")
    }

    /// A valid coordinate outside the zoo map.
    public static func outOfRange(_ point: GeoPoint) -> ZooError {
        ZooError(.outOfRange, "point \(Geo.describe(point)) is outside the zoo map")
    }

    /// The animal has no map location to route to or from.
    public static func noMapLocation(animalID: Int, name: String) -> ZooError {
        ZooError(.failedPrecondition, "animal \(animalID) \"\(name)\" has no location on the map")
    }

    /// The footpath graph has no path between the two ends (`what` says which).
    public static func noPath(_ what: String) -> ZooError { ZooError(.notFound, "no footpath route \(what)") }

    /// A request value that makes no sense (negative radius, empty tour…).
    public static func invalidArgument(_ message: String) -> ZooError { ZooError(.invalidArgument, message) }

    /// A source file could not be imported at all.
    public static func importFailed(source: String, reason: String) -> ZooError {
        ZooError(.invalidArgument, "cannot import \(source): \(reason)")
    }
}

import BlobsAPI
import ClassificationAPI
import HealthAPI
import JobsAPI
import OCRAPI
import RPCWire
import Schema
import Testing
import ZooAPI

/// The method options the protos declare, as the API modules carry them: the access levels are the permission
/// tables each service's App held before they moved into the protos (a change here changes who may call what), and
/// the small-request methods have their size limit.
@Suite struct MethodOptionsTests {
    /// The methods of `methods` that are not at `level`, by name.
    static func names(_ methods: [ProtoMethodInfo], notAt level: MethodAccess) -> [String: MethodAccess] {
        Dictionary(
            uniqueKeysWithValues: methods.filter { $0.access != level }.map {
                (String($0.path.split(separator: "/").last!), $0.access)
            })
    }

    @Test func theAccessLevelsAreTheServicesPermissionTables() {
        // Reading the zoo is public; replacing its data is the admin's.
        #expect(Self.names(ZooV1.Zoo.methods, notAt: .public) == ["ImportData": .admin, "ImportTiles": .admin])
        // Templates, records and scans are their user's.
        #expect(Self.names(OcrV1.OCR.methods, notAt: .user).isEmpty)
        // Samples are their user's; signing up is the admin's (issue 38), unless a replica opens it (--open-signup).
        #expect(Self.names(HealthV1.Health.methods, notAt: .user) == ["CreateUser": .admin])
        // Apps' models serve everyone; which model an app gets, models and the catalogue are the admin's (issue 41).
        #expect(
            Self.names(ClassificationV1.Classification.methods, notAt: .user) == [
                "Classify": .public, "Detect": .public, "ListModels": .public, "GetModel": .public,
                "SearchCatalogue": .public,
                "GetCatalogueEntry": .public, "ImportModel": .admin, "SetActiveModel": .admin, "DeleteModel": .admin,
                "ImportCatalogue": .admin, "SetDeployment": .admin, "ListDeployments": .public,
                "DeleteDeployment": .admin,
            ])
        // Between replicas only, with the admin token.
        #expect(Self.names(BlobsV1.Blobs.methods, notAt: .admin).isEmpty)
        // A user's jobs are theirs (the zoo opens its own: ZooService.jobsAccess).
        #expect(Self.names(JobsV1.Jobs.methods, notAt: .user).isEmpty)
        // The built-ins never pass the guard, and say so.
        #expect(
            (RpcV1.Health.methods + RpcV1.Reflection.methods + RpcV1.Stats.methods).allSatisfy { $0.access == .public })
    }

    @Test func smallRequestMethodsHaveASizeLimitAndUploadsTheServersDefault() {
        #expect(ZooV1.Zoo.searchAnimals.maxRequestBytes == 64 << 10)
        #expect(ZooV1.Zoo.searchAnimals.info.maxRequestBytes == 64 << 10)
        #expect(JobsV1.Jobs.getJob.maxRequestBytes == 64 << 10)
        #expect(ZooV1.Zoo.importData.maxRequestBytes == nil)
        #expect(ZooV1.Zoo.importTiles.maxRequestBytes == nil)
        #expect(OcrV1.OCR.scan.maxRequestBytes == nil)
        #expect(ClassificationV1.Classification.classify.maxRequestBytes == nil)
        #expect(BlobsV1.Blobs.putBlob.maxRequestBytes == nil)
        #expect(HealthV1.Health.addSamples.maxRequestBytes == nil)
    }

    /// The zoo app's REST routes are bound in zoo.proto to the methods they answer as (the REST renderer refuses to
    /// start without one of them); no other service has plain HTTP routes.
    @Test func theZooAppsRoutesAreBoundInTheProto() {
        let bound = Dictionary(
            uniqueKeysWithValues: ZooV1.Zoo.methods.filter { !$0.httpGet.isEmpty }.map {
                (String($0.path.split(separator: "/").last!), $0.httpGet)
            })
        #expect(
            bound == [
                "GetAnimal": ["/api/animals/{id}"],
                "ListFilterValues": ["/api/classes", "/api/biotops", "/api/foods", "/api/zooHouses"],
                "GetFootpathGraph": ["/api/map/metadata"],
            ])
        let others =
            OcrV1.OCR.methods + HealthV1.Health.methods + ClassificationV1.Classification.methods + JobsV1.Jobs.methods
            + BlobsV1.Blobs.methods
        #expect(others.allSatisfy { $0.httpGet.isEmpty })
    }
}

import JobsAPI
import OCRAPI
import RPCWire
import Schema
import Testing
import ZooAPI

/// What a client learns from the API modules it links about each call: whether it needs a token (the proto's
/// access level) and how large a request the server takes. The gateway links no App, where the permission tables
/// used to be; with the levels in the method descriptors it can send its token only to the calls that need one.
@Suite struct MethodAccessTests {
    @Test func theMethodDescriptorsSayWhichCallsNeedAToken() {
        let needingToken = ZooV1.Zoo.methods.filter(\.access.needsToken).map(\.path)
        #expect(needingToken == [ZooV1.Zoo.importData.path, ZooV1.Zoo.importTiles.path])
        #expect(!ZooV1.Zoo.searchAnimals.access.needsToken)
        #expect(ZooV1.Zoo.importData.access == .admin)
        #expect(OcrV1.OCR.methods.allSatisfy { $0.access == .user && $0.access.needsToken })
        #expect(JobsV1.Jobs.methods.allSatisfy { $0.access.needsToken })
        #expect(!RpcV1.Health.check.access.needsToken)
        // Found by path, as a client holding only a call's path would.
        let byPath = Dictionary(uniqueKeysWithValues: (ZooV1.Zoo.methods + OcrV1.OCR.methods).map { ($0.path, $0) })
        #expect(byPath["/menagerie.zoo.v1.Zoo/GetAnimal"]?.access == .public)
        #expect(byPath["/menagerie.zoo.v1.Zoo/GetAnimal"]?.maxRequestBytes == 64 << 10)
        #expect(byPath["/menagerie.ocr.v1.OCR/Scan"]?.maxRequestBytes == nil)
    }
}

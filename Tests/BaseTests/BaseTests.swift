import Base
import Foundation
import Testing

@Suite struct HeapTests {
    @Test func popsInAscendingOrderWhateverThePushOrder() {
        var generator = SystemRandomNumberGenerator()
        for count in [0, 1, 2, 3, 10, 257] {
            let values = (0..<count).map { _ in Int.random(in: 0..<50, using: &generator) }
            var heap = Heap<Int>(capacity: count)
            for value in values { heap.push(value) }
            #expect(heap.count == count && heap.first == values.min())
            var popped: [Int] = []
            while let value = heap.popFirst() { popped.append(value) }
            #expect(popped == values.sorted())
            #expect(heap.isEmpty)
        }
    }

    @Test func removingElementsKeepsTheOrder() {
        var heap = Heap<Int>()
        for value in [9, 4, 7, 1, 8, 2, 6, 3, 5, 0] { heap.push(value) }
        heap.removeAll { $0 % 3 == 0 }
        var popped: [Int] = []
        while let value = heap.popFirst() { popped.append(value) }
        #expect(popped == [1, 2, 4, 5, 7, 8])
    }
}

@Suite struct UpwardSearchTests {
    @Test func candidatesClimbFromEachStartToBelowTheRoot() {
        let candidates = UpwardSearch.candidates("x/y", from: [URL(fileURLWithPath: "/a/b"), URL(fileURLWithPath: "/c")])
        #expect(candidates.map(\.path) == ["/a/b/x/y", "/a/x/y", "/c/x/y"])
    }

    @Test func findsTheSourceTreeAboveTheTestExecutable() throws {
        let found = try #require(UpwardSearch.find("compose/services.conf"))
        #expect(FileManager.default.fileExists(atPath: found.deletingLastPathComponent().appendingPathComponent("compose").path))
        #expect(UpwardSearch.find("no/such/file-\(UUID().uuidString)") == nil)
    }
}

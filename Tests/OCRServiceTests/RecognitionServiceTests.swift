import Foundation
import Jobs
import JobsAPI
import JobsService
import OCRAPI
import OCRCore
import OCRService
import OCRTestSupport
import RPC
import RPCTesting
import Schema
import StorageTestSupport
import Testing
import TextRecognition
import WorkLane

/// Scan, DraftRecord and StartBatchScan: uploads as client streams, recognition on the lane, batches as jobs.
@Suite struct RecognitionServiceTests {
    let store: TemplateStore
    let jobs: JobRunner
    let client: RPCClient
    var ocr: OcrV1.OCR.Client { OcrV1.OCR.Client(wrapping: client) }

    /// One pool for the suite's services, so each language set initialises once.
    static let recognizer = TextRecognizer(engines: EnginePool(maxEnginesPerConfiguration: 2))

    init(
        maxUploadBytes: Int = OCRService.defaultMaxUploadBytes, maxBatchBytes: Int = OCRService.defaultMaxBatchBytes,
        maxPixels: Int = 60_000_000
    ) throws {
        store = try TemplateStore.inMemory(using: .testBackend)
        let lane = WorkLane(name: "lane", threads: 2, queueLimit: 8)
        jobs = JobRunner(store: try JobStore(database: store.database), lane: lane, failureMapping: JobsRPC.failure)
        let recognizer =
            maxPixels == 60_000_000
            ? Self.recognizer
            : TextRecognizer(engines: Self.recognizer.engines, limits: DecodeLimits(maxPixels: maxPixels))
        let service = OCRService(
            store: store, recognizer: recognizer, lane: lane, jobs: jobs, maxUploadBytes: maxUploadBytes,
            maxBatchBytes: maxBatchBytes)
        client = RPCClient(transports: [
            InProcessTransport(server: RPCServer(name: "ocr", services: [service, JobsService(runner: jobs)]))
        ])
    }

    static func code(_ body: () async throws -> Void) async -> (StatusCode?, String) {
        do {
            try await body()
            return (nil, "")
        } catch let error as RPCError {
            return (error.code, error.message)
        } catch {
            return (.unknown, "\(error)")
        }
    }

    /// Sends `data` in chunks of `chunkSize` after a first message with the options.
    static func upload(_ data: Data, chunkSize: Int, level: OcrV1.RecognitionLevel = .fast)
        -> @Sendable (RequestWriter<OcrV1.ScanRequest>) async throws -> Void
    {
        { writer in
            try await writer.send(OcrV1.ScanRequest(options: OcrV1.ScanOptions(languages: ["eng"], level: level)))
            var offset = 0
            while offset < data.count {
                let end = min(offset + chunkSize, data.count)
                try await writer.send(OcrV1.ScanRequest(chunk: Array(data[offset..<end])))
                offset = end
            }
        }
    }

    @Test(.enabled(if: OCRData.enabled, Comment(rawValue: OCRData.skipText)))
    func aPageUploadedInSmallChunksIsRead() async throws {
        let page = try OCRData.data("phototest.tif")
        let reply = try await ocr.scan(requests: Self.upload(page, chunkSize: 7000))
        #expect(reply.text.contains("quick brown dog"), "read: \(reply.text)")
        #expect(reply.observations.contains { $0.level == .word && $0.text == "brown" && $0.confidence > 0.5 })
        #expect(reply.pages.count == 1 && reply.pages[0].width > 0)
        // Each step is timed, and the total is their sum.
        let timings = try #require(reply.timings)
        #expect(
            timings.decodeSeconds > 0 && timings.preprocessSeconds > 0 && timings.recognizeSeconds > 0, "\(timings)")
        #expect(
            abs(timings.totalSeconds - (timings.decodeSeconds + timings.preprocessSeconds + timings.recognizeSeconds))
                < 1e-9)
        #expect(
            timings.recognizeSeconds > timings.decodeSeconds, "reading a page takes longer than decoding it: \(timings)"
        )
    }

    @Test func anUploadOverTheLimitIsResourceExhausted() async throws {
        let fixture = try RecognitionServiceTests(maxUploadBytes: 100_000)
        let (code, message) = await Self.code {
            _ = try await fixture.ocr.scan(requests: Self.upload(Data(repeating: 7, count: 150_000), chunkSize: 40_000))
        }
        #expect(code == .resourceExhausted)
        #expect(message.contains("limit"), "\(message)")
    }

    /// The header of an image over the pixel limit refuses the upload while it still arrives: the client's stream
    /// would go on far past the upload limit.
    @Test func tooManyPixelsAreRefusedFromTheHeaderBeforeTheUploadEnds() async throws {
        let fixture = try RecognitionServiceTests(maxUploadBytes: 1 << 30, maxPixels: 1_000_000)
        let png = try Image.blank(width: 2000, height: 1000).encoded(as: .png)
        let (code, message) = await Self.code {
            _ = try await fixture.ocr.scan { writer in
                try await writer.send(OcrV1.ScanRequest(options: OcrV1.ScanOptions(), chunk: Array(png)))
                for _ in 0..<10_000 {
                    try await writer.send(OcrV1.ScanRequest(chunk: Array(repeating: 0, count: 64 * 1024)))
                }
            }
        }
        #expect(code == .resourceExhausted)
        #expect(message.contains("pixels"), "\(message)")
    }

    /// A GIF of a few bytes claiming 65535 × 65535: refused from its header, never handed to Leptonica (which
    /// would decode it to learn its size).
    @Test func aTinyGIFClaimingAHugeScreenIsResourceExhausted() async throws {
        func u16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
        let gif =
            Array("GIF89a".utf8) + u16(65535) + u16(65535) + [0, 0, 0]
            + [0x2C] + u16(0) + u16(0) + u16(65535) + u16(65535) + [0, 2, 0, 0x3B]
        let (code, message) = await Self.code {
            _ = try await ocr.scan(requests: Self.upload(Data(gif), chunkSize: 1 << 20))
        }
        #expect(code == .resourceExhausted)
        #expect(message.contains("pixels"), "\(message)")
    }

    /// The upload limit is per image: a batch of many photos may hold more than one image's limit in all (it was
    /// capped at that, so `gateway ocr scan *.jpg` failed after a dozen phone photos), up to the batch's own limit.
    @Test func theUploadLimitIsPerImageAndABatchHasItsOwn() async throws {
        let fixture = try RecognitionServiceTests(maxUploadBytes: 100_000, maxBatchBytes: 250_000)
        func batch(_ sizes: [Int]) async -> (StatusCode?, String) {
            await Self.code {
                let job = try await fixture.ocr.startBatchScan { writer in
                    try await writer.send(
                        OcrV1.BatchScanRequest(options: OcrV1.ScanOptions(languages: ["eng"], level: .fast)))
                    for (index, size) in sizes.enumerated() {
                        try await writer.send(
                            OcrV1.BatchScanRequest(
                                fileName: "\(index).jpg", chunk: Array(repeating: 7, count: size / 2)))
                        try await writer.send(
                            OcrV1.BatchScanRequest(chunk: Array(repeating: 7, count: size - size / 2)))
                    }
                }
                var last: JobsV1.Job?
                for try await snapshot in JobsV1.Jobs.Client(wrapping: fixture.client).watchJob(
                    JobsV1.WatchJobRequest(id: job.id))
                {
                    last = snapshot
                }
                #expect(last?.state == .succeeded, "junk files fail one by one, not the job")
            }
        }
        let (fits, fitsMessage) = await batch([90_000, 90_000])
        #expect(fits == nil, "two files under the image limit, more than it together: \(fitsMessage)")
        let (large, largeMessage) = await batch([10_000, 100_001])
        #expect(
            large == .resourceExhausted && largeMessage.hasPrefix("1.jpg: ")
                && largeMessage.contains("upload limit of 100000 bytes"), "\(largeMessage)")
        let (many, manyMessage) = await batch([90_000, 90_000, 90_000])
        #expect(
            many == .resourceExhausted && manyMessage.contains("batch") && manyMessage.contains("250000 bytes"),
            "\(manyMessage)")
        let (single, _) = await Self.code {
            _ = try await fixture.ocr.scan(requests: Self.upload(Data(repeating: 7, count: 100_001), chunkSize: 50_000))
        }
        #expect(single == .resourceExhausted)
    }

    @Test func bytesThatAreNoImageAreInvalidArgument() async throws {
        let (code, message) = await Self.code {
            _ = try await ocr.scan(requests: Self.upload(Data("not an image at all, just text".utf8), chunkSize: 10))
        }
        #expect(code == .invalidArgument)
        #expect(message == "cannot decode image")
        #expect(await Self.code { _ = try await ocr.scan { _ in } }.0 == .invalidArgument)
        let (languageCode, _) = await Self.code {
            _ = try await ocr.scan { writer in
                try await writer.send(
                    OcrV1.ScanRequest(options: OcrV1.ScanOptions(languages: ["xx"]), chunk: [1, 2, 3]))
            }
        }
        #expect(languageCode == .invalidArgument)
    }

    @Test func aBlankImageIsNotFound() async throws {
        let png = try Image.blank(width: 400, height: 300).encoded(as: .png)
        #expect(
            await Self.code { _ = try await ocr.scan(requests: Self.upload(png, chunkSize: 1 << 20)) }.0 == .notFound)
    }

    @Test func aDraftForAnUnknownTemplateIsNotFound() async throws {
        let (code, _) = await Self.code {
            _ = try await ocr.draftRecord { writer in
                try await writer.send(OcrV1.DraftRecordRequest(template: "nope", chunk: [1, 2, 3]))
            }
        }
        #expect(code == .notFound)
    }

    @Test(.enabled(if: OCRData.enabled, Comment(rawValue: OCRData.skipText)))
    func aDraftFillsValuesFromTheirRegions() async throws {
        let page = try OCRData.data("phototest.tif")
        let scan = try await ocr.scan(requests: Self.upload(page, chunkSize: 1 << 20))
        let brown = try #require(scan.observations.first { $0.level == .word && $0.text == "brown" })
        _ = try await ocr.createTemplate(
            OcrV1.CreateTemplateRequest(
                name: "Page",
                values: [
                    OcrV1.ValueDefinition(name: "Colour", region: brown.box, level: .word),
                    OcrV1.ValueDefinition(
                        name: "Nothing", region: OcrV1.NormalizedBox(x: 0.001, y: 0.001, width: 0.002, height: 0.002)),
                ]))
        let draft = try await ocr.draftRecord { writer in
            try await writer.send(
                OcrV1.DraftRecordRequest(template: "Page", options: OcrV1.ScanOptions(languages: ["eng"], level: .fast))
            )
            try await writer.send(OcrV1.DraftRecordRequest(chunk: Array(page)))
        }
        #expect(draft.values.map(\.text) == ["brown", ""])
        #expect(draft.values[0].confidence > 0.5 && draft.values[1].confidence == 0)
        #expect(draft.template?.name == "Page")
        #expect(
            try await ocr.latestRecords(OcrV1.LatestRecordsRequest(template: "Page")).records.isEmpty,
            "a draft saves nothing")
    }

    @Test(.enabled(if: OCRData.enabled, Comment(rawValue: OCRData.skipText)))
    func aBatchIsAJobWithAResultPerFile() async throws {
        let page = try OCRData.data("phototest.tif")
        let job = try await ocr.startBatchScan { writer in
            try await writer.send(OcrV1.BatchScanRequest(options: OcrV1.ScanOptions(languages: ["eng"], level: .fast)))
            try await writer.send(OcrV1.BatchScanRequest(fileName: "a.tif", chunk: Array(page.prefix(1000))))
            try await writer.send(OcrV1.BatchScanRequest(chunk: Array(page.dropFirst(1000))))
            try await writer.send(OcrV1.BatchScanRequest(fileName: "junk.bin", chunk: [1, 2, 3, 4, 5, 6, 7, 8, 9]))
            try await writer.send(OcrV1.BatchScanRequest(fileName: "b.tif", chunk: Array(page)))
        }
        #expect(job.kind == OCRService.batchScanJobKind)
        var snapshots: [JobsV1.Job] = []
        for try await snapshot in JobsV1.Jobs.Client(wrapping: client).watchJob(JobsV1.WatchJobRequest(id: job.id)) {
            snapshots.append(snapshot)
        }
        let last = try #require(snapshots.last)
        #expect(last.state == .succeeded, "\(String(describing: last.error))")
        let result = try OcrV1.BatchScanResult(serializedBytes: try #require(last.result).value)
        #expect(result.files.map(\.fileName) == ["a.tif", "junk.bin", "b.tif"])
        #expect(result.files[0].result?.text.contains("quick brown dog") == true)
        #expect(
            result.files[1].errorCode == UInt32(StatusCode.invalidArgument.rawValue) && result.files[1].result == nil)
        #expect(result.files[2].result?.text == result.files[0].result?.text)
        #expect(last.progress == 1)
    }

    /// A cancelled batch starts no further file and ends CANCELLED.
    @Test(.enabled(if: OCRData.enabled, Comment(rawValue: OCRData.skipText)))
    func aCancelledBatchEndsCancelled() async throws {
        let page = try OCRData.data("eurotext.tif")
        let job = try await ocr.startBatchScan { writer in
            try await writer.send(OcrV1.BatchScanRequest(options: OcrV1.ScanOptions(languages: ["eng"], level: .fast)))
            for index in 0..<20 {
                try await writer.send(OcrV1.BatchScanRequest(fileName: "\(index).tif", chunk: Array(page)))
            }
        }
        let jobsClient = JobsV1.Jobs.Client(wrapping: client)
        _ = try await jobsClient.cancelJob(JobsV1.CancelJobRequest(id: job.id))
        var last: JobsV1.Job?
        for try await snapshot in jobsClient.watchJob(JobsV1.WatchJobRequest(id: job.id)) { last = snapshot }
        #expect(last?.state == .cancelled)
        #expect(last?.error?.code == UInt32(StatusCode.cancelled.rawValue))
    }

    @Test func aBatchWithBytesBeforeAFileNameOrNoFileIsInvalid() async throws {
        #expect(
            await Self.code {
                _ = try await ocr.startBatchScan { writer in
                    try await writer.send(OcrV1.BatchScanRequest(chunk: [1, 2]))
                }
            }.0 == .invalidArgument)
        #expect(
            await Self.code {
                _ = try await ocr.startBatchScan { writer in
                    try await writer.send(OcrV1.BatchScanRequest(options: OcrV1.ScanOptions()))
                }
            }.0 == .invalidArgument)
    }
}

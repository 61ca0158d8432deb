import Allocator
import Base
import Foundation
import Jobs
import JobsAPI
import JobsService
import OCRAPI
import OCRCore
import RPC
import Schema
import TextRecognition
import WorkLane

/// The ocr service's RPC methods (`menagerie.ocr.v1.OCR`): thin handlers that validate the request, call the
/// template store and convert the answer. Domain, storage and lane errors carry their category
/// (`CategorizedError`), which the RPC server answers with its status, so handlers do not catch them.
///
/// Images arrive as client streams (options first, then chunks) and are recognised on `lane`, the service's lane
/// for heavy work, each with an engine of `recognizer`'s pool checked out on the lane thread: a handler's worker is
/// free while a page is read, so health checks and quick calls are answered meanwhile.
public struct OCRService: OcrV1.OCR.ServiceProtocol {
    public let store: TemplateStore
    public let recognizer: TextRecognizer
    /// Where recognition runs (ServiceKit's `environment.lane`); its thread count bounds how many images are
    /// read at once.
    public let lane: WorkLane
    /// Runs batch scans; without it StartBatchScan answers FAILED_PRECONDITION.
    public let jobs: JobRunner?
    /// Largest image upload, in bytes: a scan's, a draft's, and each file's of a batch.
    public let maxUploadBytes: Int
    /// Largest batch upload (all its files together), in bytes: a batch is held in memory until its job ends.
    /// `gateway ocr scan` splits many files into batches well under the default.
    public let maxBatchBytes: Int
    /// Size of the export's chunks (records per message).
    static let exportRecordsPerChunk = 500
    /// The kind of the jobs StartBatchScan starts.
    public static let batchScanJobKind = "ocr.batch_scan"
    public static let defaultMaxUploadBytes = 64 << 20
    public static let defaultMaxBatchBytes = 512 << 20

    public init(
        store: TemplateStore, recognizer: TextRecognizer = TextRecognizer(), lane: WorkLane = WorkLane(name: "ocr"),
        jobs: JobRunner? = nil, maxUploadBytes: Int = OCRService.defaultMaxUploadBytes,
        maxBatchBytes: Int = OCRService.defaultMaxBatchBytes
    ) {
        self.store = store
        self.recognizer = recognizer
        self.lane = lane
        self.jobs = jobs
        self.maxUploadBytes = maxUploadBytes
        self.maxBatchBytes = maxBatchBytes
    }

    // MARK: Recognition

    public func scan(requests: RequestStream<OcrV1.ScanRequest>, context: ServerContext) async throws
        -> OcrV1.ScanResponse
    {
        var options: RecognitionOptions?
        var annotate = false
        var upload = UploadCollector(limit: maxUploadBytes, decoder: recognizer.decoder)
        for try await message in requests {
            if options == nil {
                let parsed = try RequestValidation.options(message.options)
                try parsed.validate()
                options = parsed
                annotate = message.options?.annotate ?? false
            }
            try await upload.append(message.chunk)
        }
        let data = try upload.finish()
        guard let options else {
            throw RPCError(.invalidArgument, "the scan sent no message: options and image bytes expected")
        }
        let result = try await recognize(data, options: options)
        var response = OcrV1.ScanResponse(result)
        if annotate { response.annotatedPng = try await annotation(data, result: result) }
        return response
    }

    public func draftRecord(
        requests: RequestStream<OcrV1.DraftRecordRequest>, context: ServerContext
    ) async throws -> OcrV1.DraftRecordResponse {
        var first: (Template, RecognitionOptions)?
        var annotate = false
        var upload = UploadCollector(limit: maxUploadBytes, decoder: recognizer.decoder)
        for try await message in requests {
            if first == nil {
                // The template is looked up before the photo arrives: an unknown one is refused at once.
                let parsed = try RequestValidation.options(message.options)
                try parsed.validate()
                first = (try template(message.template, context), parsed)
                annotate = message.options?.annotate ?? false
            }
            try await upload.append(message.chunk)
        }
        let data = try upload.finish()
        guard let (template, options) = first else {
            throw RPCError(.invalidArgument, "the draft sent no message: template, options and photo bytes expected")
        }
        let result = try await recognize(data, options: options)
        let assigned = TemplateMatcher.assign(template.values, in: result)
        var scan = OcrV1.ScanResponse(result)
        if annotate { scan.annotatedPng = try await annotation(data, result: result, values: assigned) }
        return OcrV1.DraftRecordResponse(
            template: OcrV1.Template(template), values: assigned.map { OcrV1.RecordValue($0.value) }, scan: scan,
            takenAt: PhotoDateReader.read(data)?.iso8601 ?? "")
    }

    public func startBatchScan(
        requests: RequestStream<OcrV1.BatchScanRequest>, context: ServerContext
    ) async throws -> JobsV1.Job {
        guard let jobs else {
            throw RPCError(.failedPrecondition, "this ocr server runs no jobs, so it takes no batches")
        }
        var options: RecognitionOptions?
        var files: [BatchFile] = []
        var upload: UploadCollector?
        var total = 0
        // The batch's bytes hold their share of the memory budget until its job ends (or the upload fails).
        let held = MemoryReservation()
        func close() throws {
            guard var current = upload else { return }
            files[files.count - 1].data = try current.finish()
            total += files[files.count - 1].data.count
            upload = nil
        }
        for try await message in requests {
            if options == nil {
                let parsed = try RequestValidation.options(message.options)
                try parsed.validate()
                options = parsed
            }
            if !message.fileName.isEmpty {
                try close()
                guard files.count < Self.maxBatchFiles else {
                    throw RPCError(.resourceExhausted, "a batch holds at most \(Self.maxBatchFiles) files")
                }
                files.append(BatchFile(name: message.fileName, data: Data()))
                upload = UploadCollector(
                    limit: min(maxUploadBytes, maxBatchBytes - total), decoder: recognizer.decoder,
                    batchLimit: maxBatchBytes - total < maxUploadBytes ? maxBatchBytes : nil, reservation: held)
            } else if upload == nil, !message.chunk.isEmpty {
                throw RPCError(.invalidArgument, "image bytes before the first file_name")
            }
            try await upload?.append(
                message.chunk, file: message.fileName.isEmpty ? files.last?.name : message.fileName)
        }
        try close()
        guard let options, !files.isEmpty else { throw RPCError(.invalidArgument, "the batch names no file") }
        let batch = BatchRecognizer(recognizer: recognizer, lane: lane)
        let uploaded = files
        let job = try await jobs.start(
            kind: Self.batchScanJobKind, submitter: context.submitter, user: context.caller?.name
        ) { context -> OcrV1.BatchScanResult in
            defer { held.releaseAll() }
            let results = try batch.recognize(
                uploaded, options: options, isCancelled: { context.isCancelled },
                progress: { done, total in
                    context.report(progress: Double(done) / Double(total), message: "\(done) of \(total) files read")
                })
            return OcrV1.BatchScanResult(
                files: zip(uploaded, results).map { file, result in
                    switch result {
                    case .success(let recognised):
                        OcrV1.BatchScanFile(fileName: file.name, result: OcrV1.ScanResponse(recognised))
                    case .failure(let error):
                        OcrV1.BatchScanFile(
                            fileName: file.name, errorCode: StatusCode(error.category).rawValue,
                            errorMessage: error.message)
                    }
                })
        }
        return JobsV1.Job(job)
    }

    /// Files in one batch at most.
    static let maxBatchFiles = 10_000

    /// Recognises on the lane: a full lane answers RESOURCE_EXHAUSTED, a stopping one UNAVAILABLE. The photo's
    /// decoded pages hold their share of the memory budget meanwhile (`DecodeHold`).
    func recognize(_ data: Data, options: RecognitionOptions) async throws -> RecognitionResult {
        let recognizer = recognizer
        let held = try await DecodeHold.reserve(for: data, maxPixels: recognizer.decoder.limits.maxPixels)
        defer {
            // A large photo's many small allocations stay with the process once freed: given back after it.
            if held.bytes >= DecodeHold.returnAfter { Allocator.returnFreedMemory() }
            held.releaseAll()
        }
        return try await lane.run { try recognizer.recognizeBlocking(data, options: options) }
    }

    /// The annotated picture, drawn on the lane (it decodes the photo again and encodes a PNG).
    func annotation(
        _ data: Data, result: RecognitionResult, values: [(value: RecordValue, observation: Observation?)] = []
    ) async throws -> [UInt8] {
        let decoder = recognizer.decoder
        return Array(
            try await lane.run { try Annotator.annotate(data, result: result, values: values, decoder: decoder) })
    }

    // MARK: Templates and records

    public func createTemplate(
        request: OcrV1.CreateTemplateRequest, context: ServerContext
    ) async throws -> OcrV1.CreateTemplateResponse {
        let values = try RequestValidation.values(request.values)
        let first = request.firstRecord.isEmpty ? nil : request.firstRecord.map(RecordValue.init)
        let (template, record) = try store(context).createTemplate(
            name: request.name, description: request.description, values: values, firstRecord: first)
        return OcrV1.CreateTemplateResponse(
            template: OcrV1.Template(template), firstRecord: record.map(OcrV1.Record.init))
    }

    public func listTemplates(
        request: OcrV1.ListTemplatesRequest, context: ServerContext
    ) async throws -> OcrV1.ListTemplatesResponse {
        OcrV1.ListTemplatesResponse(templates: try store(context).templates().map(OcrV1.Template.init))
    }

    public func getTemplate(request: OcrV1.GetTemplateRequest, context: ServerContext) async throws
        -> OcrV1.GetTemplateResponse
    {
        OcrV1.GetTemplateResponse(template: OcrV1.Template(try template(request.template, context)))
    }

    public func renameTemplate(
        request: OcrV1.RenameTemplateRequest, context: ServerContext
    ) async throws -> OcrV1.RenameTemplateResponse {
        let template = try template(request.template, context)
        return OcrV1.RenameTemplateResponse(
            template: OcrV1.Template(try store(context).rename(templateID: template.id, to: request.newName)))
    }

    public func renameValues(
        request: OcrV1.RenameValuesRequest, context: ServerContext
    ) async throws -> OcrV1.RenameValuesResponse {
        let template = try template(request.template, context)
        var renames: [String: String] = [:]
        for rename in request.renames {
            guard renames.updateValue(rename.to, forKey: rename.from) == nil else {
                throw RPCError(.invalidArgument, "value \"\(rename.from)\" is renamed twice")
            }
        }
        return OcrV1.RenameValuesResponse(
            template: OcrV1.Template(try store(context).renameValues(templateID: template.id, renames)))
    }

    public func updateTemplate(
        request: OcrV1.UpdateTemplateRequest, context: ServerContext
    ) async throws -> OcrV1.UpdateTemplateResponse {
        let template = try template(request.template, context)
        var renames: [String: String] = [:]
        for rename in request.renames {
            guard renames.updateValue(rename.to, forKey: rename.from) == nil else {
                throw RPCError(.invalidArgument, "value \"\(rename.from)\" is renamed twice")
            }
        }
        return OcrV1.UpdateTemplateResponse(
            template: OcrV1.Template(
                try store(context).updateTemplate(
                    id: template.id, name: request.name, description: request.description, renames: renames)))
    }

    public func deleteTemplate(
        request: OcrV1.DeleteTemplateRequest, context: ServerContext
    ) async throws -> OcrV1.DeleteTemplateResponse {
        try store(context).deleteTemplate(id: try template(request.template, context).id)
        return OcrV1.DeleteTemplateResponse()
    }

    public func addRecord(request: OcrV1.AddRecordRequest, context: ServerContext) async throws
        -> OcrV1.AddRecordResponse
    {
        let template = try template(request.template, context)
        let (date, source) = try RequestValidation.recordDate(request.createdAt, source: request.dateSource)
        let record = try store(context).addRecord(
            templateID: template.id, values: request.values.map(RecordValue.init), at: date, dateSource: source)
        return OcrV1.AddRecordResponse(record: OcrV1.Record(record))
    }

    public func updateRecord(request: OcrV1.UpdateRecordRequest, context: ServerContext) async throws
        -> OcrV1.UpdateRecordResponse
    {
        let templateID = request.template.isEmpty ? nil : try template(request.template, context).id
        var values: [String: String] = [:]
        for value in request.values {
            guard values.updateValue(value.text, forKey: value.name) == nil else {
                throw RPCError(.invalidArgument, "value \"\(value.name.prefix(80))\" is given twice")
            }
        }
        let date = try request.createdAt.map { try RequestValidation.recordDate($0, source: .given).date }
        guard !values.isEmpty || date != nil else {
            throw RPCError(.invalidArgument, "nothing to change: give values or created_at")
        }
        return OcrV1.UpdateRecordResponse(
            record: OcrV1.Record(
                try store(context).updateRecord(
                    id: request.recordID, templateID: templateID, values: values, date: date)))
    }

    public func latestRecords(
        request: OcrV1.LatestRecordsRequest, context: ServerContext
    ) async throws -> OcrV1.LatestRecordsResponse {
        let template = try template(request.template, context)
        let limit = request.limit == 0 ? 5 : Int(min(request.limit, UInt32(TemplateStore.maxPageSize)))
        return OcrV1.LatestRecordsResponse(
            records: try store(context).latestRecords(templateID: template.id, limit: limit).map(OcrV1.Record.init))
    }

    public func listRecords(request: OcrV1.ListRecordsRequest, context: ServerContext) async throws
        -> OcrV1.ListRecordsResponse
    {
        let template = try template(request.template, context)
        let page = try store(context).records(
            templateID: template.id, pageSize: Int(min(request.pageSize, UInt32(Int32.max))),
            pageToken: request.pageToken.isEmpty ? nil : request.pageToken)
        return OcrV1.ListRecordsResponse(
            records: page.records.map(OcrV1.Record.init), nextPageToken: page.nextPageToken ?? "")
    }

    public func deleteRecord(request: OcrV1.DeleteRecordRequest, context: ServerContext) async throws
        -> OcrV1.DeleteRecordResponse
    {
        try store(context).deleteRecord(id: request.recordID)
        return OcrV1.DeleteRecordResponse()
    }

    /// The header first, then the records page by page, so a long history never sits in one message.
    public func exportRecords(
        request: OcrV1.ExportRecordsRequest, response: ResponseWriter<OcrV1.ExportRecordsChunk>, context: ServerContext
    ) async throws {
        let format = try RecordsCSV.Format(
            raw: request.raw, byteOrderMark: request.bom, delimiter: request.delimiter, timeZone: request.timeZone)
        let template = try template(request.template, context)
        try await response.send(OcrV1.ExportRecordsChunk(csv: RecordsCSV.header(template, format: format)))
        var token: String?
        repeat {
            let page = try store(context).records(
                templateID: template.id, pageSize: Self.exportRecordsPerChunk, pageToken: token)
            if !page.records.isEmpty {
                try await response.send(
                    OcrV1.ExportRecordsChunk(
                        csv: page.records.map { RecordsCSV.line($0, template: template, format: format) }.joined()))
            }
            token = page.nextPageToken
        } while token != nil
    }

    private func template(_ reference: String, _ context: ServerContext) throws -> Template {
        try store(context).template(try RequestValidation.templateReference(reference))
    }

    /// The templates of the caller the server's guard established: each user sees and changes only their own.
    /// Without a guard (tests in process) the caller is nobody and the store is the admin's, whose templates
    /// also are those made before owners existed.
    private func store(_ context: ServerContext) -> TemplateStore {
        context.caller.map { store.owned(by: $0.name) } ?? store
    }
}

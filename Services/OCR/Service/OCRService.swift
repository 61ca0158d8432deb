import Foundation
import OCRCore
import RPC
import Schema
import ServiceAPI

/// The ocr service's RPC methods (`menagerie.ocr.v1.OCR`): thin handlers that validate the request, call the
/// template store and convert the answer. Domain errors carry their own status (`OCRError: RPCErrorConvertible`,
/// a busy database is mapped by ServiceKit), so handlers do not catch them.
///
/// Scan, StartBatchScan and DraftRecord (client streams of image chunks, recognition on the heavy-work lane with
/// `recognizer`'s engine pool) arrive with client streaming and jobs.
public struct OCRService: OcrV1.OCR.ServiceProtocol {
    public let store: TemplateStore
    public let recognizer: TextRecognizer
    /// Size of the export's chunks (records per message).
    static let exportRecordsPerChunk = 500

    public init(store: TemplateStore, recognizer: TextRecognizer = TextRecognizer()) {
        self.store = store
        self.recognizer = recognizer
    }

    public func createTemplate(
        request: OcrV1.CreateTemplateRequest, context: ServerContext
    ) async throws -> OcrV1.CreateTemplateResponse {
        let values = try RequestValidation.values(request.values)
        let first = request.firstRecord.isEmpty ? nil : request.firstRecord.map(RecordValue.init)
        let (template, record) = try store.createTemplate(
            name: request.name, description: request.description, values: values, firstRecord: first)
        return OcrV1.CreateTemplateResponse(template: OcrV1.Template(template), firstRecord: record.map(OcrV1.Record.init))
    }

    public func listTemplates(
        request: OcrV1.ListTemplatesRequest, context: ServerContext
    ) async throws -> OcrV1.ListTemplatesResponse {
        OcrV1.ListTemplatesResponse(templates: try store.templates().map(OcrV1.Template.init))
    }

    public func getTemplate(request: OcrV1.GetTemplateRequest, context: ServerContext) async throws -> OcrV1.GetTemplateResponse {
        OcrV1.GetTemplateResponse(template: OcrV1.Template(try template(request.template)))
    }

    public func renameTemplate(
        request: OcrV1.RenameTemplateRequest, context: ServerContext
    ) async throws -> OcrV1.RenameTemplateResponse {
        let template = try template(request.template)
        return OcrV1.RenameTemplateResponse(
            template: OcrV1.Template(try store.rename(templateID: template.id, to: request.newName)))
    }

    public func renameValues(
        request: OcrV1.RenameValuesRequest, context: ServerContext
    ) async throws -> OcrV1.RenameValuesResponse {
        let template = try template(request.template)
        var renames: [String: String] = [:]
        for rename in request.renames {
            guard renames.updateValue(rename.to, forKey: rename.from) == nil else {
                throw RPCError(.invalidArgument, "value \"\(rename.from)\" is renamed twice")
            }
        }
        return OcrV1.RenameValuesResponse(template: OcrV1.Template(try store.renameValues(templateID: template.id, renames)))
    }

    public func deleteTemplate(
        request: OcrV1.DeleteTemplateRequest, context: ServerContext
    ) async throws -> OcrV1.DeleteTemplateResponse {
        try store.deleteTemplate(id: try template(request.template).id)
        return OcrV1.DeleteTemplateResponse()
    }

    public func addRecord(request: OcrV1.AddRecordRequest, context: ServerContext) async throws -> OcrV1.AddRecordResponse {
        let template = try template(request.template)
        var date = Date()
        if let seconds = request.createdAt {
            guard seconds.isFinite, seconds >= 0 else { throw RPCError(.invalidArgument, "created_at must be a Unix time") }
            date = Date(timeIntervalSince1970: seconds)
        }
        let record = try store.addRecord(templateID: template.id, values: request.values.map(RecordValue.init), at: date)
        return OcrV1.AddRecordResponse(record: OcrV1.Record(record))
    }

    public func latestRecords(
        request: OcrV1.LatestRecordsRequest, context: ServerContext
    ) async throws -> OcrV1.LatestRecordsResponse {
        let template = try template(request.template)
        let limit = request.limit == 0 ? 5 : Int(min(request.limit, UInt32(TemplateStore.maxPageSize)))
        return OcrV1.LatestRecordsResponse(
            records: try store.latestRecords(templateID: template.id, limit: limit).map(OcrV1.Record.init))
    }

    public func listRecords(request: OcrV1.ListRecordsRequest, context: ServerContext) async throws -> OcrV1.ListRecordsResponse {
        let template = try template(request.template)
        let page = try store.records(
            templateID: template.id, pageSize: Int(min(request.pageSize, UInt32(Int32.max))),
            pageToken: request.pageToken.isEmpty ? nil : request.pageToken)
        return OcrV1.ListRecordsResponse(records: page.records.map(OcrV1.Record.init), nextPageToken: page.nextPageToken ?? "")
    }

    public func deleteRecord(request: OcrV1.DeleteRecordRequest, context: ServerContext) async throws -> OcrV1.DeleteRecordResponse {
        try store.deleteRecord(id: request.recordID)
        return OcrV1.DeleteRecordResponse()
    }

    /// The header first, then the records page by page, so a long history never sits in one message.
    public func exportRecords(
        request: OcrV1.ExportRecordsRequest, response: ResponseWriter<OcrV1.ExportRecordsChunk>, context: ServerContext
    ) async throws {
        let template = try template(request.template)
        try await response.send(OcrV1.ExportRecordsChunk(csv: RecordsCSV.header(template)))
        var token: String?
        repeat {
            let page = try store.records(templateID: template.id, pageSize: Self.exportRecordsPerChunk, pageToken: token)
            if !page.records.isEmpty {
                try await response.send(
                    OcrV1.ExportRecordsChunk(csv: page.records.map { RecordsCSV.line($0, template: template) }.joined()))
            }
            token = page.nextPageToken
        } while token != nil
    }

    private func template(_ reference: String) throws -> Template {
        try store.template(try RequestValidation.templateReference(reference))
    }
}

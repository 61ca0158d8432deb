import ArgumentParser
import Foundation
import GatewayKit
import JobsAPI
import OCRAPI
import OCRPolicy
import RPC
import Schema

/// Image files the service reads, for shell completion.
let imageExtensions = ["png", "jpg", "jpeg", "tif", "tiff", "bmp", "gif", "webp", "heic", "heif"]

/// `--level`: how much recognition does before reading.
enum OCRLevel: String, CaseIterable, ExpressibleByArgument {
    case fast, accurate
}

/// `--segmentation`: where to expect text; `auto` lets the service choose per image.
enum OCRSegmentation: String, CaseIterable, ExpressibleByArgument {
    case auto, page, block, line, sparse

    var proto: OcrV1.Segmentation {
        switch self {
        case .auto: .unspecified
        case .page: .page
        case .block: .block
        case .line: .line
        case .sparse: .sparse
        }
    }
}

/// The recognition options every command that uploads a photo takes.
struct OCRScanOptions: ParsableArguments {
    @Option(name: .customLong("lang"), help: "Languages in priority order, Tesseract's spelling.")
    var languages = "ces+eng"

    @Option(
        help:
            "fast (recognition only) or accurate (also turns pages upright, deskews, binarises photos, and keeps the image as it is when that reads with more confidence)."
    )
    var level = OCRLevel.accurate

    @Option(
        name: .customLong("words"),
        help: "A file of custom words (one per line or separated by spaces) that win over look-alikes (default: none).",
        completion: .file())
    var wordsFile: String?

    @Option(
        help:
            "Where to expect text; auto tries page segmentation, and sparse too when that finds little; sparse suits displays and labels, page documents."
    )
    var segmentation = OCRSegmentation.auto

    @Option(
        name: .customLong("min-text-height"), help: "Leave out text lower than this fraction (0–1) of the image height."
    )
    var minimumTextHeight = 0.0

    func validate() throws {
        guard minimumTextHeight.isFinite, minimumTextHeight >= 0, minimumTextHeight < 1 else {
            throw InvalidValue("--min-text-height must be a fraction in [0, 1) (got \(minimumTextHeight))")
        }
    }

    /// The files the options name exist and can be read (before anything connects).
    func checkFiles() throws {
        if let wordsFile { try InputFile.check(wordsFile, role: "--words") }
    }

    /// The options as the service takes them.
    func proto() throws -> OcrV1.ScanOptions {
        var words: [String] = []
        if let wordsFile {
            guard let text = String(data: try InputFile.read(wordsFile, role: "--words"), encoding: .utf8) else {
                throw InvalidValue("--words \(wordsFile) is not UTF-8 text")
            }
            words = text.split(whereSeparator: \.isWhitespace).map(String.init)
        }
        return OcrV1.ScanOptions(
            languages: languages.split(whereSeparator: { $0 == "+" || $0 == "," }).map(String.init),
            level: level == .fast ? .fast : .accurate, customWords: words, minimumTextHeight: minimumTextHeight,
            segmentation: segmentation.proto)
    }
}

/// `--annotate FILE`: the annotated PNG the service drew, written where asked.
enum OCRAnnotation {
    static let help = ArgumentHelp(
        "Also write the photo as PNG with each word's box drawn (blue) and, for a record, each value's box and text (green; red when uncertain) (default: none)."
    )

    static func write(_ png: [UInt8], to path: String) throws {
        do {
            try Data(png).write(to: URL(fileURLWithPath: path))
        } catch {
            throw FileError(
                .notWritable, path: path, reason: (error as NSError).localizedDescription, role: "--annotate")
        }
    }
}

/// Reading photos and sending them as client streams.
enum OCRUpload {
    /// Bytes per upload message: well inside a frame and the call's flow-control window.
    static let chunkSize = 1 << 20

    static func read(_ path: String) throws -> Data { try InputFile.read(path) }

    /// Files in one batch at most (the service takes 10 000).
    static let maxFilesPerBatch = 1000

    /// `paths` in order, grouped into batches of at most `budget` bytes (their sizes on disk) and
    /// `maxFilesPerBatch` files; a file larger than `budget` makes a batch of its own.
    static func batches(_ paths: [String], budget: Int) throws -> [[String]] {
        let sizes = try paths.map { path -> Int in
            try InputFile.check(path)
            return (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
        }
        return batches(sizes: sizes, budget: budget).map { $0.map { paths[$0] } }
    }

    /// Indices of `sizes` grouped as `batches(_:budget:)` groups files.
    static func batches(sizes: [Int], budget: Int) -> [[Int]] {
        var batches: [[Int]] = []
        var current: [Int] = [], bytes = 0
        for (index, size) in sizes.enumerated() {
            if !current.isEmpty && (size > budget - bytes || current.count == maxFilesPerBatch) {
                batches.append(current)
                current = []
                bytes = 0
            }
            current.append(index)
            bytes += size
        }
        if !current.isEmpty { batches.append(current) }
        return batches
    }

    /// `data` in chunks of `chunkSize` (at least one, possibly empty).
    static func chunks(_ data: Data) -> [[UInt8]] {
        guard !data.isEmpty else { return [[]] }
        return stride(from: 0, to: data.count, by: chunkSize).map { Array(data[$0..<min($0 + chunkSize, data.count)]) }
    }

    /// Recognition takes seconds, more on a busy server: a call with a photo waits at least two minutes.
    static func callOptions(_ global: GlobalOptions) -> CallOptions {
        CallOptions(timeout: .milliseconds(Int64(max(global.timeout, 120) * 1000)))
    }

    static func scan(_ ocr: OcrV1.OCR.Client, _ data: Data, options: OcrV1.ScanOptions, global: GlobalOptions)
        async throws
        -> OcrV1.ScanResponse
    {
        try await ocr.scan(options: callOptions(global)) { writer in
            for (index, chunk) in chunks(data).enumerated() {
                try await writer.send(OcrV1.ScanRequest(options: index == 0 ? options : nil, chunk: chunk))
            }
        }
    }
}

/// How scans print.
enum OCRScanFormat {
    /// One line per word the service doubts (`note: "243" is in doubt (confidence 0.60): a number on a segment …`),
    /// for standard error beside the plain text: the text stays as read, for pipes, and a person reading it learns
    /// which numbers to check, as a template's record would flag them.
    static func doubtNotes(_ scan: OcrV1.ScanResponse, file: String? = nil) -> [String] {
        let prefix = file.map { "\($0): " } ?? ""
        return scan.observations.filter { $0.level == .word && !$0.doubt.isEmpty }.map {
            "note: \(prefix)\"\($0.text)\" is in doubt (confidence \(String(format: "%.2f", $0.confidence))): \($0.doubt)"
        }
    }

    /// The plain text of a scan on standard output, what it doubts on standard error.
    static func printText(_ scan: OcrV1.ScanResponse, file: String? = nil) {
        print(scan.text)
        for note in doubtNotes(scan, file: file) { writeStandardError(note + "\n") }
    }

    /// Each text once, numbered as `--values` picks observations: one row per line (the blocks only repeat their
    /// lines), with the numbers of its words in order, so `12.6` in the line `Volts 12.6 V` listed with words
    /// `5 6 7` is 6, and the whole line is its own number. `--json` gives every observation (blocks, lines, words).
    static func printObservations(_ scan: OcrV1.ScanResponse) {
        var rows: [[String]] = []
        // Why a line's reading is in doubt, in a last column when any is (the seven-segment reader's reasons).
        let doubts = scan.observations.contains { $0.level == .line && !$0.doubt.isEmpty }
        for (index, observation) in scan.observations.enumerated() where observation.level == .line {
            var words: [String] = []
            var next = index + 1
            while next < scan.observations.count, scan.observations[next].level == .word {
                words.append("\(next)")
                next += 1
            }
            let box = observation.box ?? OcrV1.NormalizedBox()
            rows.append(
                [
                    "\(index)", observation.text.replacingOccurrences(of: "\n", with: " ⏎ "),
                    words.joined(separator: " "),
                    String(format: "%.2f", observation.confidence),
                ]
                    + [box.x, box.y, box.width, box.height].map { String(format: "%.3f", $0) }
                    + (doubts ? [observation.doubt] : []))
        }
        printTable(
            ["#", "line", "words #", "confidence", "x", "y", "width", "height"] + (doubts ? ["doubt"] : []), rows)
    }
}

/// `gateway ocr scan FILE… [--lang ces+eng] [--level fast|accurate] [--words FILE] [--json]`.
struct OCRScan: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Recognise the text of photos and scans (PNG, JPEG, TIFF incl. multi-page, BMP, GIF, WebP).",
        discussion: """
            One file is uploaded and read at once. Several are uploaded as batch jobs (of at most --batch-mib each, one \
            after another), read in parallel on the service, and followed with a progress bar (plain lines when the \
            output is not a terminal); the text of each follows under its name. --json prints protobuf's JSON mapping of the \
            ScanResponse for one file: {"text", "observations": [{"level", "text", "confidence", "box", "boxPx", "page", "shape", \
            "label"}], "pages", "orientationDegrees", "timings", "annotatedPng"} (boxes with a top-left origin: box in fractions of the image, boxPx \
            in pixels). For several files it prints a JSON array with one BatchScanFile per file, in the order given: \
            {"fileName", "result": {the ScanResponse}, "errorCode": 0, "errorMessage": ""}, or no "result" and the \
            gRPC status code and message for a file that could not be read; with --detach, an array of the started jobs. \
            Numbers the service doubts (a number on a segment display the seven-segment reader did not confirm) are named \
            on standard error beside the plain text (note: "243" is in doubt …); --json gives each word's "doubt". \
            Exits with the status code of the first file that failed.
            """)

    @Argument(help: "Image files.", completion: .file(extensions: imageExtensions)) var files: [String]
    @OptionGroup var scanOptions: OCRScanOptions
    @Flag(
        help: "Upload several files as batch jobs and print their ids instead of waiting (gateway ocr jobs watch ID).")
    var detach = false
    @Option(help: OCRAnnotation.help, completion: .file(extensions: ["png"])) var annotate: String?
    @Option(
        name: .customLong("batch-mib"),
        help:
            "Several files go to the service in batches (jobs, one after another) of at most this many MiB each; keep it under the service's --max-batch-mib."
    )
    var batchMiB = 256.0
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard !files.isEmpty else { throw ValidationError("name at least one image file") }
        if annotate != nil, files.count != 1 || detach {
            throw ValidationError("--annotate draws one photo: name one file, without --detach")
        }
        guard batchMiB.isFinite, batchMiB > 0 else {
            throw InvalidValue("--batch-mib must be more than 0 (got \(batchMiB))")
        }
    }

    func run() async throws {
        try scanOptions.checkFiles()
        for file in files { try InputFile.check(file) }
        var scanRequest = try scanOptions.proto()
        scanRequest.annotate = annotate != nil
        let options = scanRequest
        try await global.withClient(for: "ocr", { $0 }) { client in
            let ocr = OcrV1.OCR.Client(wrapping: client)
            if files.count == 1 && !detach {
                var scan = try await OCRUpload.scan(ocr, try OCRUpload.read(files[0]), options: options, global: global)
                if let annotate {
                    try OCRAnnotation.write(scan.annotatedPng, to: annotate)
                    scan.annotatedPng = []  // written to the file, not printed as base64
                }
                try global.render(scan, text: { OCRScanFormat.printText(scan) })
                return
            }
            // Files go in batches of at most --batch-mib (each a job, one after another), so many photos never pass
            // the server's limit for one batch (--max-batch-mib, 512 MiB by default) nor sit in its memory at once.
            let batches = try OCRUpload.batches(files, budget: Int(batchMiB * 1_048_576))
            var started: [JobsV1.Job] = []
            var results: [OcrV1.BatchScanFile] = []
            for (number, paths) in batches.enumerated() {
                let job = try await ocr.startBatchScan(options: OCRUpload.callOptions(global)) { writer in
                    try await writer.send(OcrV1.BatchScanRequest(options: options))
                    for path in paths {
                        for (index, chunk) in OCRUpload.chunks(try OCRUpload.read(path)).enumerated() {
                            try await writer.send(
                                OcrV1.BatchScanRequest(fileName: index == 0 ? path : "", chunk: chunk))
                        }
                    }
                }
                started.append(job)
                if detach { continue }
                if batches.count > 1 && !global.json {
                    writeStandardError("batch \(number + 1) of \(batches.count): \(paths.count) files\n")
                }
                let ended = try await followJob(
                    job.id, with: JobsV1.Jobs.Client(wrapping: client), display: global.json ? nil : ProgressDisplay())
                guard let result = try ended.requireResult(), result.typeName == OcrV1.BatchScanResult.protoName else {
                    throw RPCError(.internalError, "batch scan job \(job.id) ended without its result")
                }
                results += try OcrV1.BatchScanResult(serializedBytes: result.value).files
            }
            if detach {
                try global.render(
                    jsonValue: { .array(started.map(\.outputJSON)) },
                    text: {
                        for job in started {
                            print("started \(job.summary); follow it with: gateway ocr jobs watch \(job.id)")
                        }
                    })
                return
            }
            let batch = OcrV1.BatchScanResult(files: results)
            try global.render(
                jsonValue: { .array(batch.files.map(\.outputJSON)) },
                text: {
                    // Texts on standard output, each under its name; a file that could not be read on standard error.
                    var first = true
                    for file in batch.files {
                        guard let scan = file.result else {
                            writeStandardError(
                                "error: \(file.fileName): \(StatusCode(rawValue: file.errorCode).name): \(file.errorMessage)\n"
                            )
                            continue
                        }
                        print((first ? "" : "\n") + "==> \(file.fileName) <==")
                        OCRScanFormat.printText(scan, file: file.fileName)
                        first = false
                    }
                })
            if let failed = batch.files.first(where: { $0.result == nil }) {
                throw ExitCode(Int32(failed.errorCode))
            }
        }
    }
}

/// Questions on the terminal (interactive picking and correcting).
enum Terminal {
    static var isInteractive: Bool { isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1 }

    static func ask(_ prompt: String) -> String? {
        // Questions go where progress goes: standard output carries only results.
        writeStandardError(prompt)
        return readLine(strippingNewline: true)
    }
}

/// `gateway ocr template create --from PHOTO --name NAME [--values "Volts=2,Amps=5"]`.
struct OCRTemplateCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Make a template from a photo: recognise it, pick the observations that are values and name them.",
        discussion: """
            The photo is recognised and its observations are listed with numbers. On a terminal you pick values by number and name them; in scripts --values \
            "Volts=2,Amps=5" names observations 2 and 5. Without --values off a terminal, the numbered observations \
            are printed (with --json: the scan, numbered by position in "observations") before the usage error; \
            `gateway ocr scan PHOTO --json` lists the same numbers (with the same --lang, --level, --segmentation and \
            --words). Each value learns where it sits, what it looks like (its shape with the unit beside it: #.#V) \
            and the label to its left, so records find it wherever the display sits in the frame. The photo's values \
            become the template's first record (--no-record: not).
            """)

    @Option(
        name: .customLong("from"), help: "The template's first photo.", completion: .file(extensions: imageExtensions))
    var photo: String
    @Option(help: "The template's name.") var name: String
    @Option(help: "What the template is for (default: none).") var description = ""
    @Option(
        help:
            "NAME=INDEX pairs, comma-separated, picking observations by the number listed (default: ask on the terminal)."
    )
    var values: String?
    @Flag(name: .customLong("no-record"), help: "Do not save the photo's values as the first record.") var noRecord =
        false
    @OptionGroup var scanOptions: OCRScanOptions
    @OptionGroup var global: GlobalOptions

    /// `Volts=2,Amps=5` as (name, index) pairs in order.
    static func parseValues(_ text: String) throws -> [(String, Int)] {
        try text.split(separator: ",").map { pair in
            guard let equals = pair.lastIndex(of: "="),
                let index = Int(pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces)),
                index >= 0
            else { throw InvalidValue("--values: \"\(pair)\" is not NAME=INDEX") }
            let name = pair[..<equals].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty else { throw InvalidValue("--values: \"\(pair)\" has no name") }
            return (name, index)
        }
    }

    func validate() throws {
        if let values { _ = try Self.parseValues(values) }
    }

    func run() async throws {
        try scanOptions.checkFiles()
        let data = try OCRUpload.read(photo)
        let options = try scanOptions.proto()
        try await global.withOCR { ocr in
            let scan = try await OCRUpload.scan(ocr, data, options: options, global: global)
            var picked: [(String, Int)]
            if let values {
                picked = try Self.parseValues(values)
            } else if Terminal.isInteractive {
                OCRScanFormat.printObservations(scan)
                picked = Self.pickInteractively(count: scan.observations.count)
            } else {
                // A script learns the numbers here (or from `gateway ocr scan PHOTO --json`,
                // whose observations are numbered from 0 in the same order).
                try global.render(scan, text: { OCRScanFormat.printObservations(scan) })
                throw ValidationError(
                    "--values NAME=INDEX,… is needed when not asking on a terminal: pick from the \(scan.observations.count) observations listed above"
                )
            }
            for (name, index) in picked where index >= scan.observations.count {
                throw InvalidValue(
                    "--values: \(name)=\(index), but the photo has \(scan.observations.count) observations (0…\(scan.observations.count - 1))"
                )
            }
            let definitions = picked.map { name, index in
                let observation = scan.observations[index]
                return OcrV1.ValueDefinition(
                    name: name, region: observation.box, level: observation.level, shape: observation.shape,
                    label: observation.label)
            }
            // A reading the engine doubted keeps its reason: the service checks a first record's values only when
            // they say nothing (`TemplateMatcher.checked`).
            let first =
                noRecord
                ? []
                : picked.map { name, index in
                    OcrV1.RecordValue(
                        name: name, text: scan.observations[index].text,
                        confidence: scan.observations[index].confidence,
                        uncertainty: scan.observations[index].doubt)
                }
            let reply = try await ocr.createTemplate(
                OcrV1.CreateTemplateRequest(
                    name: name, description: description, values: definitions, firstRecord: first),
                options: global.callOptions)
            try global.render(
                reply,
                text: {
                    let template = reply.template ?? OcrV1.Template()
                    print(
                        "created template #\(template.id) \(template.name): "
                            + template.values.map(\.name).joined(separator: ", "))
                    if let record = reply.firstRecord { OCRFormat.printRecords([record], template: template) }
                })
        }
    }

    /// Asks for observation numbers and names until an empty answer.
    static func pickInteractively(count: Int) -> [(String, Int)] {
        var picked: [(String, Int)] = []
        while true {
            guard
                let answer = Terminal.ask("observation # of a value (empty to finish): ")?.trimmingCharacters(
                    in: .whitespaces),
                !answer.isEmpty
            else { return picked }
            guard let index = Int(answer), (0..<count).contains(index) else {
                writeStandardError("a number 0…\(count - 1), please\n")
                continue
            }
            guard let name = Terminal.ask("name of value #\(index): ")?.trimmingCharacters(in: .whitespaces),
                !name.isEmpty
            else {
                continue
            }
            picked.append((name, index))
        }
    }
}

/// `gateway ocr record add TEMPLATE PHOTO [--yes]`.
struct OCRRecordAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Read a new photo of a template's kind and save its values as a record.",
        discussion: """
            Each value is taken from the observation that best fits what it looked like on the template's first photo \
            (its shape and unit), the label beside it and where it sat. A value that nothing fits well, that fits two \
            values, whose digits' count differs from the first photo's (9.8 for 239.8), or that was read with a \
            confidence under \(RecordPolicy.minimumConfidence) is uncertain. Values are saved normalised (224.5v as \
            224.5 with unit V, 229,5 as 229.5), the text as read kept beside. On a terminal the values are shown with \
            their confidences and why one is uncertain; type a value to confirm or correct it, Enter keeps it as read \
            (an uncertain one stays flagged); --yes, or \
            output that is not a terminal, saves them as read, the uncertain ones flagged (the CSV's Uncertain column), \
            and exits with status 65 when any is. --json prints the AddRecordResponse: each value's "uncertainty" says \
            why. \
            The record is dated --date, else when the photo was taken (its EXIF DateTimeOriginal, in its \
            OffsetTimeOriginal or else this machine's zone), else now; the record and the CSV say which.
            """)

    @Argument(help: "Template name or id.") var template: String
    @Argument(help: "The photo.", completion: .file(extensions: imageExtensions)) var photo: String
    @Flag(help: "Save the values as read, without asking.") var yes = false
    @Option(
        help:
            "When the photo was taken, ISO 8601 (2026-11-22T14:05, local time unless an offset is given) (default: the photo's EXIF date, else now)."
    )
    var date: String?
    @Option(help: OCRAnnotation.help, completion: .file(extensions: ["png"])) var annotate: String?
    @OptionGroup var scanOptions: OCRScanOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let date { _ = try OCRDates.option(date) }
    }

    /// --date, else the photo's EXIF time (ignored, with a note, when it is not a date a record may have), else
    /// none: the service dates the record on saving.
    static func recordDate(given: String?, takenAt: String) throws -> (Double?, OcrV1.DateSource) {
        if let given { return (try OCRDates.option(given).timeIntervalSince1970, .given) }
        guard !takenAt.isEmpty else { return (nil, .upload) }
        guard let taken = try? OCRDates.option(takenAt, name: "the photo's EXIF date") else {
            writeStandardError("note: the photo's EXIF date \(takenAt) is out of range; the record is dated now\n")
            return (nil, .upload)
        }
        return (taken.timeIntervalSince1970, .exif)
    }

    /// `Napětí [224.5 V] (read "224.5v", confidence 0.91) UNCERTAIN: its shape #.#V is not …; type the value (Enter keeps it flagged): `
    static func prompt(_ value: OcrV1.RecordValue) -> String {
        let shown = value.unit.isEmpty ? value.text : "\(value.text) \(value.unit)"
        let read = value.rawText.isEmpty || value.rawText == value.text ? "" : "read \"\(value.rawText)\", "
        let confidence = "(\(read)confidence \(String(format: "%.2f", value.confidence)))"
        guard !value.uncertainty.isEmpty else { return "\(value.name) [\(shown)] \(confidence): " }
        return "\(value.name) [\(shown)] \(confidence)\n  UNCERTAIN: \(value.uncertainty)\n"
            + "  type the value to confirm or correct it (Enter keeps it flagged): "
    }

    /// The value after a person's answer: unchanged for Enter, else the text they typed (confidence 1, checked).
    static func answered(_ value: OcrV1.RecordValue, _ answer: String) -> OcrV1.RecordValue {
        let typed = answer.trimmingCharacters(in: .whitespaces)
        guard !typed.isEmpty else { return value }
        var value = value
        value.text = typed
        value.rawText = ""
        value.confidence = 1
        value.uncertainty = ""
        return value
    }

    func run() async throws {
        try scanOptions.checkFiles()
        let data = try OCRUpload.read(photo)
        var scanRequest = try scanOptions.proto()
        scanRequest.annotate = annotate != nil
        let options = scanRequest
        let reference = template
        try await global.withOCR { ocr in
            let draft = try await ocr.draftRecord(options: OCRUpload.callOptions(global)) { writer in
                for (index, chunk) in OCRUpload.chunks(data).enumerated() {
                    try await writer.send(
                        OcrV1.DraftRecordRequest(
                            template: index == 0 ? reference : "", options: index == 0 ? options : nil, chunk: chunk))
                }
            }
            if let annotate { try OCRAnnotation.write(draft.scan?.annotatedPng ?? [], to: annotate) }
            var values = draft.values
            if !yes && !global.json && Terminal.isInteractive {
                // A value a person types is theirs (confidence 1, no longer uncertain); Enter keeps the reading as it
                // is, its flag too: pressing Enter is no check.
                for index in values.indices {
                    let answer = Terminal.ask(Self.prompt(values[index])) ?? ""
                    values[index] = Self.answered(values[index], answer)
                }
            }
            let (createdAt, source) = try Self.recordDate(given: date, takenAt: draft.takenAt)
            let reply = try await ocr.addRecord(
                OcrV1.AddRecordRequest(template: reference, values: values, createdAt: createdAt, dateSource: source),
                options: global.callOptions)
            let record = reply.record ?? OcrV1.Record()
            try global.render(
                reply,
                text: {
                    print(
                        "saved record \(record.id), dated \(isoDate(record.createdAt)) (\(OCRDates.sourceName(record.dateSource)))"
                    )
                    printTable(
                        ["value", "text", "confidence", "uncertain"],
                        record.values.map { [$0.name, $0.text, String(format: "%.2f", $0.confidence), $0.uncertainty] })
                })
            let uncertain = record.values.filter { !$0.uncertainty.isEmpty }
            if !uncertain.isEmpty {
                if !global.json {
                    writeStandardError(
                        "note: stored with \(uncertain.count) uncertain value\(uncertain.count == 1 ? "" : "s") ("
                            + uncertain.map(\.name).joined(separator: ", ")
                            + "): check them and correct with gateway ocr record edit \(record.id) NAME=TEXT\n")
                }
                throw ExitCode(GatewayExit.storedUncertain)
            }
        }
    }
}

import ArgumentParser
import Base
import Foundation
import Identity
import Jobs
import JobsService
import OCRCore
import OCRService
import PPOCR
import ServiceKit
import SevenSegment
import TextRecognition

/// The ocr service executable.
@main
struct OCRCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ocr",
        abstract: "Menagerie's ocr service: text recognition with Tesseract, templates and records.",
        discussion: """
            Templates and records live in an SQLite file (--database, default DATA_DIR/ocr.sqlite) that replicas \
            may share. Recognition uses the trained data in $TESSDATA_PREFIX or Debian's tessdata directory, and \
            PP-OCR's networks (--ppocr, which compose installs) for displays and photos.
            """)

    @OptionGroup var options: ServiceOptions

    @Option(
        name: .customLong("max-megapixels"),
        help:
            "Largest decoded image (per page) accepted, in megapixels (default: what --memory-budget holds at \(DecodeHold.bytesPerPixel) bytes a pixel, at most 60)."
    )
    var maxMegapixels: Double?

    /// The pixel limit: given, or what one scan can hold of the memory budget, so a photo admitted by its header is
    /// never one the budget can never hold (it waited its patience out, then was refused "retry later").
    var megapixels: Double { maxMegapixels ?? min(60, DecodeHold.megapixels(fittingIn: options.memoryBudget << 20)) }

    @Option(
        name: .customLong("max-upload-mib"), help: "Largest image accepted (a scan's, or each file of a batch), in MiB."
    )
    var maxUploadMiB = 64

    @Option(
        name: .customLong("max-batch-mib"),
        help: "Largest batch scan accepted (its files together, held in memory until its job ends), in MiB.")
    var maxBatchMiB = 512

    @Option(
        name: .customLong("ppocr"),
        help:
            "PP-OCR's models folder (compose/compose ppocr installs it; default: $MENAGERIE_PPOCR, which compose sets; without one, Tesseract reads alone)."
    )
    var ppocr: String?

    @Option(
        name: .customLong("sevenseg"),
        help:
            "The seven-segment reader's folder (compose/compose sevenseg installs it; default: $MENAGERIE_SEVENSEG, which compose sets; without one, PP-OCR reads segment displays alone)."
    )
    var sevenseg: String?

    func validate() throws {
        guard (1...4096).contains(maxUploadMiB) else {
            throw ValidationError("--max-upload-mib must be 1…4096 (got \(maxUploadMiB))")
        }
        guard (1...65536).contains(maxBatchMiB) else {
            throw ValidationError("--max-batch-mib must be 1…65536 (got \(maxBatchMiB))")
        }
        if let maxMegapixels, !(maxMegapixels.isFinite && maxMegapixels >= 0.01 && maxMegapixels <= 1000) {
            throw ValidationError("--max-megapixels must be 0.01…1000 (got \(maxMegapixels))")
        }
    }

    /// Exits 0 after a graceful stop, 1 when the service could not start or a background service failed.
    func run() async throws {
        do {
            try await serve()
        } catch {
            throw ExitCode.failure
        }
    }

    private func serve() async throws(ServiceRunner.Failure) {
        try await ServiceRunner.run(name: "ocr", options: options) { environment in
            let store = TemplateStore(database: try environment.openDatabase(migrations: OCRSchema.migrations))
            // One engine per lane thread and language set: every thread can read a page, none waits for an engine.
            let lane = environment.lane
            let tesseract = TextRecognizer(
                engines: EnginePool(maxEnginesPerConfiguration: lane.threads, maxIdleEngines: max(4, 2 * lane.threads)),
                limits: DecodeLimits(maxPixels: Int(megapixels * 1_000_000)))
            // Engines of the default languages, one per lane thread (with their orientation detectors), made in
            // parallel before the port opens: no request pays Tesseract's start-up. A failure (trained data missing)
            // is only logged: requests then make engines on demand and report what is missing.
            let clock = ContinuousClock()
            let start = clock.now
            do {
                let made = try await tesseract.engines.prewarm(
                    languages: RecognitionOptions.defaultLanguages, count: lane.threads, lane: lane)
                environment.logger.info(
                    "made \(made) \(RecognitionOptions.defaultLanguages.joined(separator: "+")) engines in \(clock.now - start)"
                )
            } catch {
                environment.logger.warning(
                    "could not prepare engines for \(RecognitionOptions.defaultLanguages.joined(separator: "+")): \(error)"
                )
            }
            // PP-OCR's engines, one per lane thread, made before the port opens; without its models Tesseract reads
            // alone, and the log says so.
            let ppocr = loadPPOCR(threads: lane.threads, logger: environment.logger)
            let recognizer = TextRecognizer(engines: tesseract.engines, limits: tesseract.decoder.limits, ppocr: ppocr)
            // Batch scans run as jobs, recorded beside the templates so every replica answers for them.
            let jobs = try await ServiceJobs(
                database: store.database, logger: environment.logger,
                shutdownGrace: environment.shutdownGrace, limits: environment.jobs)
            return AppServices(
                rpc: [
                    OCRService(
                        store: store, recognizer: recognizer, lane: lane, jobs: jobs.runner,
                        maxUploadBytes: maxUploadMiB << 20,
                        maxBatchBytes: maxBatchMiB << 20),
                    jobs.rpcService,
                ],
                background: [jobs.backgroundService],
                // Templates, records and scans belong to the user who made them: every call needs a user, as
                // ocr.proto and jobs.proto say.
                access: .declared)
        }
    }

    /// The PP-OCR pool from `--ppocr` (or MENAGERIE_PPOCR) with an engine per lane thread, or nil (logged) when
    /// none is configured or its models are missing, damaged or refused.
    private func loadPPOCR(threads: Int, logger: Logger) -> PPOCRPool? {
        let folder = ppocr ?? ProcessInfo.processInfo.environment["MENAGERIE_PPOCR"]
        guard let folder, !folder.isEmpty else {
            logger.warning(
                "PP-OCR is not configured (--ppocr or MENAGERIE_PPOCR): Tesseract reads alone; \(PPOCRModels.installHint)"
            )
            return nil
        }
        let clock = ContinuousClock(), start = clock.now
        do {
            let pool = PPOCRPool(
                models: try PPOCRModels.load(directory: folder), segments: loadSevenSegment(logger: logger))
            try pool.prewarm(threads)
            logger.info("made \(threads) PP-OCR engines from \(folder) in \(clock.now - start)")
            return pool
        } catch {
            logger.warning("PP-OCR is not used: \(error); Tesseract reads alone")
            return nil
        }
    }

    /// The seven-segment model from `--sevenseg` (or MENAGERIE_SEVENSEG), or nil (logged).
    private func loadSevenSegment(logger: Logger) -> SevenSegmentModel? {
        guard let folder = sevenseg ?? ProcessInfo.processInfo.environment["MENAGERIE_SEVENSEG"], !folder.isEmpty else {
            logger.warning(
                "the seven-segment reader is not configured (--sevenseg or MENAGERIE_SEVENSEG): PP-OCR reads segment displays alone; \(SevenSegmentModel.installHint)"
            )
            return nil
        }
        do {
            let model = try SevenSegmentModel.load(directory: folder)
            logger.info("seven-segment reader from \(folder)")
            return model
        } catch {
            logger.warning("the seven-segment reader is not used: \(error)")
            return nil
        }
    }
}

import Foundation
import StorageTestSupport
import TestSupport
import Testing

@testable import HealthCore

/// An export as Apple writes them, with the mess the real files carry.
enum ExportFixture {
    static let device =
        "&lt;&lt;HKDevice: 0x283e3c0a0&gt;, name:Apple Watch, manufacturer:Apple Inc., model:Watch, hardware:Watch6,2, software:10.4&gt;"
    static let phone =
        "&lt;&lt;HKDevice: 0x283e3c1b0&gt;, name:iPhone, manufacturer:Apple Inc., model:iPhone, hardware:iPhone15,2, software:17.4&gt;"
    static func sleep(_ value: String, _ start: String, _ end: String) -> String {
        #" <Record type="HKCategoryTypeIdentifierSleepAnalysis" sourceName="Jana’s Apple Watch" sourceVersion="10.4" device="\#(device)" creationDate="2026-05-01 06:30:00 +0200" startDate="\#(start)" endDate="\#(end)" value="HKCategoryValueSleepAnalysis\#(value)"/>"#
    }

    static let text = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE HealthData [
        <!-- HealthKit Export Version: 14 -->
        <!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout|ActivitySummary|ClinicalRecord|Audiogram|VisionPrescription)*)>
        <!ATTLIST HealthData
          locale CDATA #REQUIRED
        >
        <!ELEMENT ExportDate EMPTY>
        <!ATTLIST ExportDate
          value CDATA #REQUIRED
        >
        <!ELEMENT Record ((MetadataEntry|HeartRateVariabilityMetadataList)*)>
        <!ATTLIST Record
          type          CDATA #REQUIRED
          unit          CDATA #IMPLIED
          value         CDATA #IMPLIED
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          creationDate  CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!-- a comment with ] and > and "quotes' in it -->
        <!ATTLIST Workout workoutActivityType CDATA #REQUIRED duration CDATA #IMPLIED>
        ]>
        <HealthData locale="en_US">
         <ExportDate value="2026-05-02 10:00:00 +0200"/>
         <Me HKCharacteristicTypeIdentifierDateOfBirth="1980-01-01" HKCharacteristicTypeIdentifierBiologicalSex="HKBiologicalSexFemale" HKCharacteristicTypeIdentifierBloodType="HKBloodTypeNotSet"/>
         <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Jana’s iPhone" sourceVersion="17.4" device="\(phone)" unit="count" creationDate="2026-05-01 09:20:00 -0700" startDate="2026-05-01 09:00:00 -0700" endDate="2026-05-01 09:10:00 -0700" value="420"/>
         <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Jana’s Apple Watch" sourceVersion="10.4" device="\(device)" unit="count" creationDate="2026-05-01 09:20:00 -0700" startDate="2026-05-01 09:02:00 -0700" endDate="2026-05-01 09:09:00 -0700" value="400">
          <MetadataEntry key="HKTimeZone" value="America/Los_Angeles"/>
         </Record>
         <Record type="HKQuantityTypeIdentifierHeartRate" sourceName="Jana’s Apple Watch" sourceVersion="10.4" device="\(device)" unit="count/min" creationDate="2026-05-01 09:15:00 -0700" startDate="2026-05-01 09:14:23 -0700" endDate="2026-05-01 09:14:23 -0700" value="72">
          <MetadataEntry key="HKMetadataKeyHeartRateMotionContext" value="0"/>
          <HeartRateVariabilityMetadataList>
           <InstantaneousBeatsPerMinute bpm="70" time="9:14:23.12 AM"/>
          </HeartRateVariabilityMetadataList>
         </Record>
         <Record type="HKQuantityTypeIdentifierDietaryWater" sourceName="WaterMinder" unit="mL" creationDate="2026-05-01 12:00:05 +0200" startDate="2026-05-01 12:00:00 +0200" endDate="2026-05-01 12:00:00 +0200" value="250">
          <MetadataEntry key="HKWasUserEntered" value="1"/>
         </Record>
         <Record type="HKQuantityTypeIdentifierBodyMass" sourceName="Scale &amp; Co" unit="lb" creationDate="2026-05-01 07:00:00 +0200" startDate="2026-05-01 07:00:00 +0200" endDate="2026-05-01 07:00:00 +0200" value="154.3"/>
         <Record type="HKQuantityTypeIdentifierVO2Max" sourceName="Jana’s Apple Watch" unit="mL/min·kg" startDate="2026-05-01 07:00:00 +0200" endDate="2026-05-01 07:00:00 +0200" value="41.2"/>
         <Record type="HKQuantityTypeIdentifierHeartRate" sourceName="Broken Strap" unit="count/min" startDate="2026-05-01 10:00:00 +0200" endDate="2026-05-01 10:00:00 +0200" value="500"/>
        \(sleep("AsleepCore", "2026-04-30 23:00:00 +0200", "2026-05-01 03:00:00 +0200"))
        \(sleep("AsleepCore", "2026-04-30 23:00:00 +0200", "2026-05-01 03:00:00 +0200"))
        \(sleep("AsleepDeep", "2026-05-01 03:00:00 +0200", "2026-05-01 04:00:00 +0200"))
        \(sleep("InBed", "2026-04-30 22:45:00 +0200", "2026-05-01 06:10:00 +0200"))
         <Correlation type="HKCorrelationTypeIdentifierBloodPressure" sourceName="Omron" creationDate="2026-05-01 08:00:00 +0200" startDate="2026-05-01 08:00:00 +0200" endDate="2026-05-01 08:00:00 +0200">
          <MetadataEntry key="HKWasUserEntered" value="0"/>
          <Record type="HKQuantityTypeIdentifierBloodPressureSystolic" sourceName="Omron" unit="mmHg" creationDate="2026-05-01 08:00:00 +0200" startDate="2026-05-01 08:00:00 +0200" endDate="2026-05-01 08:00:00 +0200" value="121"/>
          <Record type="HKQuantityTypeIdentifierBloodPressureDiastolic" sourceName="Omron" unit="mmHg" creationDate="2026-05-01 08:00:00 +0200" startDate="2026-05-01 08:00:00 +0200" endDate="2026-05-01 08:00:00 +0200" value="79"/>
         </Correlation>
         <Workout workoutActivityType="HKWorkoutActivityTypeRunning" duration="30.5" durationUnit="min" sourceName="Jana’s Apple Watch" startDate="2026-05-01 18:00:00 +0200" endDate="2026-05-01 18:30:30 +0200">
          <MetadataEntry key="HKIndoorWorkout" value="0"/>
          <WorkoutEvent type="HKWorkoutEventTypeSegment" date="2026-05-01 18:10:00 +0200" duration="10" durationUnit="min"/>
          <WorkoutStatistics type="HKQuantityTypeIdentifierActiveEnergyBurned" startDate="2026-05-01 18:00:00 +0200" endDate="2026-05-01 18:30:30 +0200" sum="310" unit="kcal"/>
          <WorkoutRoute sourceName="Jana’s Apple Watch" startDate="2026-05-01 18:00:00 +0200" endDate="2026-05-01 18:30:30 +0200">
           <FileReference path="/workout-routes/route_2026-05-01_6.30pm.gpx"/>
          </WorkoutRoute>
         </Workout>
         <ActivitySummary dateComponents="2026-05-01" activeEnergyBurned="450" activeEnergyBurnedGoal="500" activeEnergyBurnedUnit="kcal" appleExerciseTime="32" appleStandHours="10"/>
        </HealthData>

        """

    static func write(_ text: String = text) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID().uuidString).xml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The 1-based line of the first line containing `needle`.
    static func line(of needle: String, in text: String = text) -> Int {
        text.components(separatedBy: "\n").firstIndex { $0.contains(needle) }! + 1
    }
}

@Suite struct ImportTests {
    let store: HealthStore
    let user: Int64

    init() throws {
        store = try HealthStore.inMemory(using: .testBackend)
        user = try store.createUser(name: "jana").user.id
    }

    func importText(_ text: String, batchSize: Int = 2048) throws -> ImportReport {
        let path = try ExportFixture.write(text)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var importer = HealthExportImporter(store: store, user: user)
        importer.batchSize = batchSize
        return try importer.importFile(atPath: path)
    }

    /// Progress comes as records are written, not once at the end (the gateway's bar moved only when the
    /// import was over): the fixture in 512-byte chunks and batches of one sample reports each, rising to the
    /// file's size.
    @Test func progressIsReportedAsRecordsAreWritten() throws {
        let path = try ExportFixture.write()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let size = Int64(ExportFixture.text.utf8.count)
        var importer = HealthExportImporter(store: store, user: user)
        importer.chunkSize = 512
        importer.batchSize = 1
        var reports: [(Int64, Int64)] = []
        let report = try importer.importFile(atPath: path) { read, total in reports.append((read, total)) }
        #expect(report.added == 10)
        #expect(Set(reports.map(\.0)).count > 3, "\(reports)")
        #expect(
            reports.map(\.0) == reports.map(\.0).sorted() && reports.last?.0 == size
                && reports.allSatisfy { $0.1 == size })
    }

    @Test func theRealFilesMessImports() throws {
        let report = try importText(ExportFixture.text)
        #expect(report.records == 13)
        #expect(report.added == 10)
        #expect(report.duplicates == 1)  // the byte-identical sleep record
        #expect(report.skippedTypes == ["HKQuantityTypeIdentifierVO2Max": 1])
        #expect(report.skippedElements == ["Workout": 1, "ActivitySummary": 1])
        #expect(report.rejected == 1)
        #expect(report.rejections.first?.contains("line \(ExportFixture.line(of: "Broken Strap"))") == true)
        #expect(report.correlations == 1)
        #expect(report.exportDate == "2026-05-02 10:00:00 +0200")

        let steps = try store.samples(SampleQuery(types: [.stepCount]), user: user)
        #expect(steps.map(\.start) == [T.ms("2026-05-01T16:00:00Z"), T.ms("2026-05-01T16:02:00Z")])
        #expect(steps.map(\.timeZone) == ["-0700", "America/Los_Angeles"])  // each keeps its zone
        #expect(
            steps[1].metadata.contains(
                MetadataEntry(
                    "HKDevice",
                    "<<HKDevice: 0x283e3c0a0>, name:Apple Watch, manufacturer:Apple Inc., model:Watch, hardware:Watch6,2, software:10.4>"
                )))
        #expect(steps[1].metadata.contains(MetadataEntry("HKTimeZone", "America/Los_Angeles")))
        #expect(steps[0].source == "Jana’s iPhone")

        let heart = try store.samples(SampleQuery(types: [.heartRate]), user: user)
        #expect(heart.map(\.value) == [72])
        #expect(heart[0].metadata.contains(MetadataEntry("HKMetadataKeyHeartRateMotionContext", "0")))
        let mass = try store.samples(SampleQuery(types: [.bodyMass]), user: user)
        #expect(abs(mass[0].value - 154.3 * 0.45359237) < 1e-9)
        #expect(mass[0].source == "Scale & Co")
        let pressure = try store.samples(
            SampleQuery(types: [.bloodPressureSystolic, .bloodPressureDiastolic]), user: user)
        #expect(Set(pressure.map(\.value)) == [121, 79])

        // Sleep: merged, the duplicate and the in-bed time do not add up: 23:00–04:00 asleep.
        let sleep = try store.statistics(
            StatisticsRequest(
                type: .sleepAnalysis, from: T.ms("2026-04-30T12:00:00Z"), to: T.ms("2026-05-01T12:00:00Z"), unit: .hour),
            user: user)
        #expect(sleep.buckets.map(\.sum) == [5])
        // Steps: the watch's 400 over 09:02–09:09 and the iPhone's 3 uncovered minutes of 10 (126).
        let steps1 = try store.statistics(
            StatisticsRequest(
                type: .stepCount, from: T.ms("2026-05-01T00:00:00Z"), to: T.ms("2026-05-02T00:00:00Z"),
                sourcePriority: ["Jana’s Apple Watch", "Jana’s iPhone"]), user: user)
        #expect(abs((steps1.buckets.first?.sum ?? 0) - 526) < 1e-9)
    }

    @Test func importingTwiceAddsNothing() throws {
        let first = try importText(ExportFixture.text)
        let anchor = try store.anchor(user: user)
        let second = try importText(ExportFixture.text)
        #expect(first.added == 10)
        #expect(second.added == 0)
        #expect(second.duplicates == 11)
        #expect(try store.anchor(user: user) == anchor)
    }

    /// XML allows white space after an end tag's name (`</Correlation >`, or a line break there).
    @Test func endTagsMayEndInWhiteSpace() throws {
        #expect(ExportFixture.text.contains(" </Correlation>"))
        let spaced = ExportFixture.text.replacingOccurrences(of: " </Correlation>", with: " </Correlation \n>")
        let report = try importText(spaced)
        #expect(report.added == 10 && report.correlations == 1)
    }

    @Test func aMalformedFileImportsNothingAndNamesTheLine() throws {
        let cases: [(String, String, String, Int)] = [
            // (what to replace, with what, text that starts the line to report, lines after it)
            // unclosed: '<' on the next line
            (#"value="250">"#, #"value="250""#, "HKQuantityTypeIdentifierDietaryWater", 1),
            (" </Correlation>", " </Record>", " </Record>\n <Workout", 0),
            (
                #"startDate="2026-05-01 07:00:00 +0200" endDate="2026-05-01 07:00:00 +0200" value="154.3""#,
                #"startDate="yesterday" endDate="2026-05-01 07:00:00 +0200" value="154.3""#, "yesterday", 0
            ),
            (#"value="72">"#, #"value="seventy-two">"#, "seventy-two", 0),
            (#"sourceName="Scale &amp; Co""#, #"sourceName="Scale & Co""#, "Scale & Co", 0),
            ("</HealthData>", "", "", 0),
        ]
        // In batches of one, the writer has written the samples before the error when the parser meets it.
        for batchSize in [2048, 1] {
            for (old, new, marker, offset) in cases {
                #expect(ExportFixture.text.contains(old), "\(old)")
                let broken = ExportFixture.text.replacingOccurrences(of: old, with: new)
                do {
                    _ = try importText(broken, batchSize: batchSize)
                    Issue.record("imported a file with \(new)")
                } catch let error as HealthError {
                    #expect(error.category == .invalidArgument)
                    if !marker.isEmpty {
                        let start = broken.range(of: marker)!.lowerBound
                        let line = broken[..<start].filter { $0 == "\n" }.count + 1 + offset
                        #expect(error.message.contains("line \(line):"), "\(error.message)")
                    }
                    #expect(error.message.contains("nothing was imported"))
                }
                #expect(try store.samples(SampleQuery(), user: user).isEmpty)
                #expect(try store.anchor(user: user) == 0)
            }
        }
    }

    @Test func csvExportPerType() throws {
        _ = try importText(ExportFixture.text)
        var csv = ""
        try store.exportCSV(type: .stepCount, user: user) { csv += $0 }
        let lines = csv.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(lines.count == 3)
        #expect(lines[0] == "uuid,type,start,end,value,unit,source,time_zone")
        #expect(
            lines[1].hasSuffix(
                ",stepCount,2026-05-01T09:00:00-07:00,2026-05-01T09:10:00-07:00,420.0,count,Jana’s iPhone,-0700"))
        #expect(lines[2].contains("2026-05-01T09:02:00-07:00"))
        var water = ""
        try store.exportCSV(type: .dietaryWater, user: user, unit: .liter) { water += $0 }
        #expect(water.contains(",0.25,L,WaterMinder,+0200"))
        var sleep = ""
        try store.exportCSV(type: .sleepAnalysis, user: user) { sleep += $0 }
        #expect(sleep.contains(",asleepDeep,,"))
        #expect(throws: HealthError.self) { try store.exportCSV(type: .stepCount, user: user, unit: .liter) { _ in } }
    }
}

/// The queue between the import's parser and writer threads.
@Suite struct SampleHandoffTests {
    /// A writer that gives up (its error) releases a parser waiting for room, and the parser's next hand-off
    /// tells it to stop.
    @Test func cancellingReleasesAWaitingParser() async throws {
        let handoff = SampleHandoff(capacity: 1)
        #expect(handoff.put(ParsedBatch()))
        let parser = Thread {
            let accepted = handoff.put(ParsedBatch())  // waits: the queue is full
            handoff.finish(accepted ? .success(ImportReport()) : .failure(ImportCancelled()))
        }
        parser.start()
        try await Task.sleep(for: TestTime.scaled(.milliseconds(50)))
        #expect(handoff.outcome == nil, "the parser waits for room")
        handoff.cancel()
        handoff.waitUntilParserEnded()
        guard case .failure(let error) = handoff.outcome else {
            Issue.record("the parser was not stopped")
            return
        }
        #expect(error is ImportCancelled)
        #expect(handoff.next() == nil)
    }

    /// A parser that failed ends the writer's loop at once: what it queued before need not be written.
    @Test func aParserFailureEndsTheWriterAtOnce() {
        let handoff = SampleHandoff(capacity: 4)
        #expect(handoff.put(ParsedBatch()))
        handoff.finish(.failure(XMLFormatError(line: 3, reason: "broken")))
        #expect(handoff.next() == nil)
    }
}

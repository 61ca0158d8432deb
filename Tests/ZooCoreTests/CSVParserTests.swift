import Testing

@testable import ZooCore

@Suite struct CSVParserTests {
    @Test func quotedFieldsWithDoubledQuotesAndDelimiters() {
        let records = CSVParser.parse("a;\"b;c\";\"say \"\"hi\"\"\"\n")
        #expect(records == [CSVRecord(line: 1, fields: ["a", "b;c", "say \"hi\""])])
    }

    @Test func multiLineFieldsKeepTheirLineBreaksAndReportStartLines() {
        let records = CSVParser.parse("id;text\n1;\"one\ntwo\"\n2;x\n")
        #expect(records.map(\.fields) == [["id", "text"], ["1", "one\ntwo"], ["2", "x"]])
        #expect(records.map(\.line) == [1, 2, 4])
    }

    @Test func crlfLineEndsAndByteOrderMark() {
        let records = CSVParser.parse("\u{FEFF}_id;name\r\n1;\"a\r\nb\"\r\n2;c\r\n")
        #expect(records.map(\.fields) == [["_id", "name"], ["1", "a\nb"], ["2", "c"]])
    }

    @Test func trailingEmptyColumnAndEmptyFields() {
        let records = CSVParser.parse("a;b;\n;\"\";x")
        #expect(records.map(\.fields) == [["a", "b", ""], ["", "", "x"]])
    }

    @Test func blankLinesAreSkipped() {
        #expect(CSVParser.parse("a\n\n\nb\n").map(\.fields) == [["a"], ["b"]])
    }

    @Test func strayQuoteInsideAQuotedFieldIsKeptLiterally() {
        // The real lexicon has `"… říká "zlatý kaloň".<newline>";"https://…"`.
        let records = CSVParser.parse("1;\"říká \"zlatý kaloň\".\n\";\"img.jpg\"\n")
        #expect(records.map(\.fields) == [["1", "říká \"zlatý kaloň\".\n", "img.jpg"]])
    }

    @Test func strayQuotedWordAtTheEndOfAQuotedField() {
        // The real lexicon has `"… s výraznými "řasami"";"https://…"`.
        let records = CSVParser.parse("\"s výraznými \"řasami\"\";\"img.jpg\"\n")
        #expect(records.map(\.fields) == [["s výraznými \"řasami\"", "img.jpg"]])
    }

    @Test func unterminatedQuoteTakesTheRestOfTheInput() {
        #expect(CSVParser.parse("1;\"open\nstill").map(\.fields) == [["1", "open\nstill"]])
    }
}

import Foundation

/// Prints rows as a table with aligned columns.
public func printTable(_ header: [String], _ rows: [[String]]) {
    print(formatTable(header, rows), terminator: "")
}

/// Rows as a table with aligned columns, one line each (the last column is not padded).
public func formatTable(_ header: [String], _ rows: [[String]]) -> String {
    let widths = header.indices.map { column in
        ([header] + rows).map { $0[column].count }.max() ?? 0
    }
    var text = ""
    for row in [header] + rows {
        let cells = row.enumerated().map { column, cell in
            column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
        }
        text += cells.joined(separator: "  ") + "\n"
    }
    return text
}

/// `1h 02m`, `3m 05s`, `12s`.
public func formatDuration(seconds: Double) -> String {
    let total = Int(seconds)
    if total >= 3600 { return "\(total / 3600)h \(String(format: "%02d", total % 3600 / 60))m" }
    if total >= 60 { return "\(total / 60)m \(String(format: "%02d", total % 60))s" }
    return "\(total)s"
}

/// Unix seconds as `2026-11-22T10:00:00Z`.
public func isoDate(_ seconds: Double) -> String {
    ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: seconds))
}

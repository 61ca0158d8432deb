// menagerie-bench: prints throughput and latency figures (no pass/fail; goals are printed beside
// the figures). Run: swift run -c release menagerie-bench [rpc] [zoo] [--seconds S]
import Foundation
import RPC
import Schema
import Transport

let arguments = CommandLine.arguments.dropFirst()
let seconds = arguments.firstIndex(of: "--seconds").flatMap { Double(arguments[arguments.index(after: $0)]) } ?? 2.0
let suites = arguments.filter { !$0.hasPrefix("--") && Double($0) == nil }

if suites.isEmpty || suites.contains("rpc") {
    try await RPCBenchmark(secondsPerRun: seconds).run()
}
if suites.isEmpty || suites.contains("zoo") {
    try await ZooBenchmark(secondsPerRun: seconds).run()
}

import Foundation
import Transport

/// The event loops of every server the benchmarks start, in process or as a service (`--loops N`;
/// default: one per core, as the services'). A global of its own file, not of main.swift, whose
/// globals belong to the main actor.
let serverLoops: Int = {
    let arguments = CommandLine.arguments
    let given = arguments.firstIndex(of: "--loops").flatMap { $0 + 1 < arguments.count ? Int(arguments[$0 + 1]) : nil }
    return max(1, given ?? ProcessInfo.processInfo.activeProcessorCount)
}()

/// Limits of the servers the benchmarks start in process: the defaults, on `serverLoops` loops.
var benchLimits: TCPServer.Limits {
    var limits = TCPServer.Limits()
    limits.loops = serverLoops
    return limits
}

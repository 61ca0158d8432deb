// menagerie-bench: prints throughput and latency figures (no pass/fail; goals are printed beside
// the figures). Run: swift run -c release menagerie-bench [suite …] [options]; `--help` lists both.
import Foundation
import RPC
import Schema
import Transport

let arguments = CommandLine.arguments.dropFirst()
let usage = """
    usage: menagerie-bench [suite …] [options]   (no suite: all of them, in this order)
    suites: parts rpc zoo ocr health identity abuse classification classification-photo detectors small-objects http
            (classification-photo: the 12 MP JPEG part of classification alone; small-objects: clover scenes, only when named)
    options: --seconds S  --rounds N  --sizes 64,65536  --callers 1,16,64  --no-floor  --no-grpc  --health-records N  --identity-users N
             --abuse-scale F  --abuse-hold S  --abuse-only NAME,…  --abuse-tls  --ocr-rounds N  --ocr-images N  --classification-epochs N
             --detector-epochs N  --classification-images N  --detection-images N  --feature-strides 16,32 (detectors; small-objects: 8,16, 8c with crops)
             --clover-scenes N  --image-size N (small-objects)
             --connections 16,64 (http)  --loops N (the servers' event loops; default: one per core, as the services')
             --rpc-connections N (rpc)
    """
/// Suites and options this program knows: anything else is a typo that would otherwise run every suite
/// with defaults for many minutes.
let knownSuites: Set = [
    "parts", "rpc", "zoo", "ocr", "health", "identity", "abuse", "classification", "classification-photo", "detectors",
    "small-objects", "http",
]
let knownFlags: Set = ["--no-floor", "--no-grpc", "--abuse-tls"]
let knownOptions: Set = [
    "--seconds", "--rounds", "--sizes", "--callers", "--health-records", "--identity-users", "--abuse-scale",
    "--abuse-hold", "--abuse-only", "--ocr-rounds",
    "--ocr-images", "--connections", "--loops", "--rpc-connections", "--classification-epochs", "--detector-epochs",
    "--classification-images",
    "--detection-images", "--feature-strides", "--clover-scenes", "--image-size",
]
if arguments.contains("--help") || arguments.contains("-h") {
    print(usage)
    exit(0)
}
do {
    var index = arguments.startIndex
    while index < arguments.endIndex {
        let argument = arguments[index]
        if knownOptions.contains(argument) {
            guard arguments.index(after: index) < arguments.endIndex else {
                FileHandle.standardError.write(Data("menagerie-bench: \(argument) needs a value\n\(usage)\n".utf8))
                exit(64)
            }
            index = arguments.index(index, offsetBy: 2)
            continue
        }
        guard knownFlags.contains(argument) || knownSuites.contains(argument) else {
            FileHandle.standardError.write(
                Data("menagerie-bench: unknown suite or option \(argument)\n\(usage)\n".utf8))
            exit(64)
        }
        index = arguments.index(after: index)
    }
}
/// The value after `--name`, if given.
func option(_ name: String) -> String? {
    arguments.firstIndex(of: "--\(name)").flatMap {
        arguments.index(after: $0) < arguments.endIndex ? arguments[arguments.index(after: $0)] : nil
    }
}

/// A comma-separated list of numbers after `--name`, or `defaults`.
func numbers(_ name: String, _ defaults: [Int]) -> [Int] {
    option(name).map { $0.split(separator: ",").compactMap { Int($0) } } ?? defaults
}

let seconds = option("seconds").flatMap(Double.init)
let suites = arguments.enumerated().filter { index, argument in
    !argument.hasPrefix("--")
        && (index == 0 || !arguments[arguments.index(arguments.startIndex, offsetBy: index - 1)].hasPrefix("--"))
}.map(\.element)

let payloadSizes = numbers("sizes", [64, 64 << 10])
if suites.isEmpty || suites.contains("parts") {
    await PartsBenchmark(payloadSizes: payloadSizes).run()
}
if suites.isEmpty || suites.contains("rpc") {
    try await RPCBenchmark(
        secondsPerRun: seconds ?? 1.0, rounds: max(1, option("rounds").flatMap(Int.init) ?? 3),
        payloadSizes: payloadSizes, callerCounts: numbers("callers", [1, 16, 64]),
        includeFloor: !arguments.contains("--no-floor"), includePeer: !arguments.contains("--no-grpc"),
        connections: max(1, option("rpc-connections").flatMap(Int.init) ?? 1)
    ).run()
}
if suites.isEmpty || suites.contains("zoo") {
    try await ZooBenchmark(secondsPerRun: seconds ?? 2.0).run()
}
if suites.isEmpty || suites.contains("ocr") {
    try await OCRBenchmark(
        rounds: max(1, option("ocr-rounds").flatMap(Int.init) ?? 2),
        imagesPerKind: max(1, option("ocr-images").flatMap(Int.init) ?? .max)
    ).run()
}
if suites.isEmpty || suites.contains("health") {
    try await HealthBenchmark(samples: option("health-records").flatMap(Int.init) ?? 1_000_000).run()
}
if suites.isEmpty || suites.contains("identity") {
    // Issue 38: an authenticated call's p99 with 30,000 users within 1.5× of 2 users.
    try await IdentityBenchmark(
        users: option("identity-users").flatMap(Int.init) ?? 30_000, secondsPerRun: seconds ?? 3.0
    ).run()
}
if suites.isEmpty || suites.contains("abuse") {
    // Starts a zoo replica of its own (the `zoo` executable built beside this one) and attacks it.
    try await AbuseBenchmark(
        scale: option("abuse-scale").flatMap(Double.init) ?? 1,
        holdSeconds: option("abuse-hold").flatMap(Double.init) ?? 3,
        only: option("abuse-only").map { $0.split(separator: ",").map(String.init) },
        tls: arguments.contains("--abuse-tls")
    ).run()
    // Issue 24's attacks on OCR's uploads, classification's imports and health's streams, each on a replica of its own.
    if !arguments.contains("--abuse-tls") {
        try await ServiceAbuseBenchmark(
            scale: option("abuse-scale").flatMap(Double.init) ?? 1,
            holdSeconds: option("abuse-hold").flatMap(Double.init) ?? 3,
            only: option("abuse-only").map { $0.split(separator: ",").map(String.init) }
        ).run()
    }
}
if suites.isEmpty || suites.contains("http") {
    // The zoo's HTTP face beside FastAPI and nginx, under wrk (Tests/Benchmarks/peers/install-http-peers installs them).
    try await HTTPBenchmark(secondsPerRun: seconds ?? 3.0, connectionCounts: numbers("connections", [16, 64])).run()
}
if suites.isEmpty || suites.contains("detectors") {
    // yolo from scratch beside transfer detectors on the pretrained feature print (issue 26).
    try await DetectorBenchmark(
        epochs: option("detector-epochs").flatMap(Int.init),
        detectionImages: option("detection-images").flatMap(Int.init),
        featureStrides: numbers("feature-strides", [16])
    ).run()
}
if suites.contains("small-objects") {
    // Issue 41: four-leaf clovers among three-leaf ones, stride 8 beside stride 16 (tens of minutes: only when named).
    try await SmallObjectBenchmark(
        epochs: option("detector-epochs").flatMap(Int.init),
        trainingScenes: option("clover-scenes").flatMap(Int.init) ?? 60,
        runs: SmallObjectBenchmark.runs(option("feature-strides")), inputSize: option("image-size").flatMap(Int.init)
    ).run()
}
if suites.isEmpty || suites.contains("classification") || suites.contains("classification-photo") {
    // Issue 41: a phone photo through a transfer model, each step apart, the service and onnxruntime.
    try await PhotoClassificationBenchmark(secondsPerRun: seconds ?? 3.0).run()
}
if suites.isEmpty || suites.contains("classification") {
    try await ClassificationBenchmark(
        cnnEpochs: option("classification-epochs").flatMap(Int.init),
        detectorEpochs: option("detector-epochs").flatMap(Int.init),
        imagesPerLabel: option("classification-images").flatMap(Int.init),
        detectionImages: option("detection-images").flatMap(Int.init),
        secondsPerRun: seconds ?? 3.0
    ).run()
}

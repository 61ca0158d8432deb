import Foundation

/// Runs blocking work (a socket read, a child process) on a thread of its own and awaits it, so it
/// never holds one of the few cooperative-pool threads that the servers under test need.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// Runs `executable` to completion with standard output and standard error kept apart (each through a file, so
/// neither pipe can fill and stall the child) and no standard input; blocking — call it off the pool.
public func runSeparatingOutput(
    _ executable: String, _ arguments: [String], environment: [String: String]
) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = environment
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("run-\(UUID().uuidString)")
    let out = scratch.appendingPathExtension("out"), err = scratch.appendingPathExtension("err")
    guard FileManager.default.createFile(atPath: out.path, contents: nil),
        FileManager.default.createFile(atPath: err.path, contents: nil)
    else {
        throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: scratch.path])
    }
    defer {
        try? FileManager.default.removeItem(at: out)
        try? FileManager.default.removeItem(at: err)
    }
    let outHandle = try FileHandle(forWritingTo: out), errHandle = try FileHandle(forWritingTo: err)
    process.standardOutput = outHandle
    process.standardError = errHandle
    process.standardInput = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    try outHandle.close()
    try errHandle.close()
    return (
        process.terminationStatus, try String(contentsOf: out, encoding: .utf8),
        try String(contentsOf: err, encoding: .utf8)
    )
}

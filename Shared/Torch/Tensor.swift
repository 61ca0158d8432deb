import Foundation
import TorchShim

/// A failure reported by libtorch (a C++ exception caught in the shim) or by a wrong use of this module.
public struct TorchError: Error, CustomStringConvertible, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "torch: \(message)" }
}

/// Turns a shim status into a Swift error carrying the calling thread's message. Called right after the
/// shim call on the same thread (nothing suspends in between), so the thread-local message is the right one.
@inline(__always)
func check(_ status: Int32) throws {
    if status != 0 { throw TorchError(String(cString: torch_last_error())) }
}

/// Runs a shim call that produces one tensor.
@inline(__always)
func produce(_ call: (UnsafeMutablePointer<torch_tensor?>) -> Int32) throws -> Tensor {
    var out: torch_tensor?
    try check(call(&out))
    guard let out else { throw TorchError("the shim returned no tensor") }
    return Tensor(owning: out)
}

/// Process-wide libtorch settings.
public enum Torch {
    /// libtorch's intra-op thread count; it uses one thread by default here, so the service sets it to the
    /// cores it gives training.
    public static var threads: Int { Int(torch_get_num_threads()) }

    /// Never more than `OMP_THREAD_LIMIT` allows: libgomp reads it when it loads, and asked for more threads than
    /// it gives, oneDNN's convolutions spun without end (a 24-image training ran 14 CPU-minutes in a process that
    /// inherited `OMP_THREAD_LIMIT=1` — TextRecognition sets it for the `tesseract` program — instead of 1 s).
    ///
    /// Unchanged counts are not set again: libtorch's `set_num_threads` also empties oneDNN's cache of prepared
    /// convolutions, which the next inference would build anew, and starts its process-wide `pthreadpool` anew (a
    /// Classify did both on every call).
    public static func setThreads(_ count: Int) throws {
        let limit =
            ProcessInfo.processInfo.environment["OMP_THREAD_LIMIT"].flatMap { Int($0) }.map { max(1, $0) } ?? Int.max
        let threads = max(1, min(count, limit))
        guard threads != self.threads else { return }
        try check(torch_set_num_threads(Int32(threads)))
    }

    /// The name of `onThreadOfItsOwn`'s threads (and so of their OpenMP threads, which Linux names after their creator).
    public static let threadName = "torch-own"

    /// Runs `work` on a thread of its own that ends with it, and waits for it. libgomp keeps a team of OpenMP threads
    /// for every thread that ran a parallel operation, for as long as that thread lives; once its threads outnumber
    /// the cores it no longer spins at its barriers but sleeps, and every team's operations pay for the wake-ups (an
    /// EfficientNet-Lite0 inference on 2 cores took 10.4 ms on the one thread that had run torch, 18–21 ms on any
    /// thread once a second had). Long work that runs beside a service's inference thread (a training) runs here, so
    /// its team goes with the thread.
    public static func onThreadOfItsOwn<T>(_ work: @escaping @Sendable () throws -> T) throws -> T {
        let outcome = ThreadOutcome<T>(), done = DispatchSemaphore(value: 0)
        let thread = Thread {
            // Named for Linux (Foundation keeps `name` to itself there): its OpenMP threads take the name.
            try? threadName.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
            outcome.result = Result { try work() }
            done.signal()
        }
        // As a lane thread's: training recurses through the network's modules.
        thread.stackSize = 8 << 20
        thread.start()
        done.wait()
        return try outcome.result!.get()
    }

    /// Seeds torch's generator (parameter initialisation, rand): with one thread, the same seed and data give
    /// the same model.
    public static func seed(_ value: UInt64) throws { try check(torch_manual_seed(value)) }

    /// Runs `body` with gradient recording off on this thread (inference, evaluation), restoring the setting.
    public static func withoutGradients<T>(_ body: () throws -> T) throws -> T {
        var previous: Int32 = 1
        try check(torch_set_grad_enabled(0, &previous))
        defer { torch_set_grad_enabled(previous, nil) }
        return try body()
    }
}

/// A libtorch tensor (CPU). Immutable from Swift except through the explicitly in-place calls (`copy(from:)`,
/// batch norm's running statistics, an optimiser's step). Sendable because libtorch's reference counting is
/// thread-safe and inference reads only; training confines its tensors to one task.
public final class Tensor: @unchecked Sendable {
    let handle: torch_tensor

    init(owning handle: torch_tensor) { self.handle = handle }
    deinit { torch_tensor_free(handle) }

    public convenience init(_ values: [Float], shape: [Int]) throws {
        guard shape.reduce(1, *) == values.count else {
            throw TorchError("\(values.count) values do not fill shape \(shape)")
        }
        let sizes = shape.map(Int64.init)
        let made = try values.withUnsafeBufferPointer { data in
            try produce { torch_from_floats(data.baseAddress, sizes, Int32(sizes.count), $0) }
        }
        self.init(owning: made.detach())
    }

    public convenience init(int64s values: [Int64], shape: [Int]) throws {
        guard shape.reduce(1, *) == values.count else {
            throw TorchError("\(values.count) values do not fill shape \(shape)")
        }
        let sizes = shape.map(Int64.init)
        let made = try values.withUnsafeBufferPointer { data in
            try produce { torch_from_int64s(data.baseAddress, sizes, Int32(sizes.count), $0) }
        }
        self.init(owning: made.detach())
    }

    /// Steals nothing: a fresh handle on the same storage (used to unwrap a produced tensor).
    private func detach() -> torch_tensor {
        var out: torch_tensor?
        _ = torch_unary(9, handle, &out)
        return out!
    }

    private static func filled(_ kind: Int32, _ shape: [Int]) throws -> Tensor {
        let sizes = shape.map(Int64.init)
        return try produce { torch_filled(kind, sizes, Int32(sizes.count), $0) }
    }
    public static func zeros(_ shape: [Int]) throws -> Tensor { try filled(0, shape) }
    public static func ones(_ shape: [Int]) throws -> Tensor { try filled(1, shape) }
    /// Standard normal values from torch's seeded generator.
    public static func rand(_ shape: [Int]) throws -> Tensor { try filled(3, shape) }

    public var shape: [Int] {
        var sizes = [Int64](repeating: 0, count: 8)
        var rank: Int32 = 0
        _ = torch_shape(handle, &sizes, 8, &rank)
        return sizes.prefix(Int(rank)).map(Int.init)
    }

    public var count: Int { shape.reduce(1, *) }

    public func floats() throws -> [Float] {
        let n = count
        return try [Float](unsafeUninitializedCapacity: n) { buffer, initialised in
            try check(torch_copy_floats(handle, buffer.baseAddress, Int64(n)))
            initialised = n
        }
    }

    public func int64s() throws -> [Int64] {
        let n = count
        return try [Int64](unsafeUninitializedCapacity: n) { buffer, initialised in
            try check(torch_copy_int64s(handle, buffer.baseAddress, Int64(n)))
            initialised = n
        }
    }

    /// The single value of a one-element tensor.
    public func item() throws -> Float {
        let values = try floats()
        guard values.count == 1 else { throw TorchError("item() of a tensor with \(values.count) elements") }
        return values[0]
    }

    /// Marks this tensor as a trainable parameter (a leaf whose gradient backward() fills).
    @discardableResult
    public func requiringGradients(_ requires: Bool = true) throws -> Tensor {
        try check(torch_set_requires_grad(handle, requires ? 1 : 0))
        return self
    }

    /// Overwrites this tensor's values with `source`'s (same shape), outside gradient recording.
    public func copy(from source: Tensor) throws { try check(torch_copy_into(handle, source.handle)) }

    public func backward() throws { try check(torch_backward(handle)) }

    /// Whether backward has given this tensor a gradient (false for a parameter the loss does not depend on).
    public var hasGradient: Bool {
        get throws {
            var found: Int32 = 0
            try check(torch_has_gradient(handle, &found))
            return found == 1
        }
    }
}

/// What `Torch.onThreadOfItsOwn`'s thread hands back: written before the semaphore is signalled, read after.
private final class ThreadOutcome<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

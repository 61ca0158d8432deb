import Foundation

/// SplitMix64: a small, fast, seedable generator, so the same seed and data give the same augmentations, splits
/// and shuffles on every machine (Swift's SystemRandomNumberGenerator cannot be seeded).
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    public mutating func unit() -> Float { Float(next() >> 40) / Float(1 << 24) }

    /// Standard normal (Box–Muller).
    public mutating func gaussian() -> Float {
        let u = max(unit(), 1e-7), v = unit()
        return (-2 * logf(u)).squareRoot() * cosf(2 * .pi * v)
    }
}

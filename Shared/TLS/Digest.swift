import CTLS

/// Message digests from OpenSSL, which the process links anyway: far faster than a hash written in Swift (the
/// PP-OCR models' 60 MB are checked at every start of the OCR service, in well under a second, debug builds too).
public enum Digest {
    /// The SHA-256 of `bytes`, as 64 lowercase hex digits.
    public static func sha256Hex(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        precondition(ok == 1 && length == 32, "OpenSSL's SHA-256 failed")
        return digest.prefix(32).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}

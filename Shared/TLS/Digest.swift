import Base
import CTLS

/// SHA-256 from OpenSSL, which the process links anyway (TLS, the cluster's relay): health's token hashes and
/// deterministic UUIDs, identity's token hashes, the blob store's and classification's content addresses and
/// model checksums, PP-OCR's model checks. Far faster than the hash once written in Swift here (the PP-OCR models'
/// 60 MB are checked at every start of the OCR service in well under a second, debug builds too). One hash in
/// progress at a time: noncopyable, so its OpenSSL context has one owner and is freed once.
public struct SHA256: ~Copyable, @unchecked Sendable {
    private let context: OpaquePointer
    private var finished = false

    public init() {
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
            preconditionFailure("OpenSSL cannot start a SHA-256")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// The digest of `bytes`.
    public static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// The digest of `bytes` (the same as `hash`, named as a checksum reads).
    public static func digest(_ bytes: [UInt8]) -> [UInt8] { hash(bytes) }

    /// The digest of `bytes` in lowercase hexadecimal: a content address.
    public static func hex(_ bytes: [UInt8]) -> String { hash(bytes).hexString }

    /// Adds `bytes` to the hash.
    public mutating func update(_ bytes: some Sequence<UInt8>) {
        precondition(!finished, "SHA256.update after finalize")
        let done =
            bytes.withContiguousStorageIfAvailable { buffer in
                EVP_DigestUpdate(context, buffer.baseAddress, buffer.count)
            } ?? Array(bytes).withUnsafeBytes { EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        precondition(done == 1, "OpenSSL's SHA-256 update failed")
    }

    /// The digest of everything added; the hasher takes no more bytes after it.
    public mutating func finalize() -> [UInt8] {
        precondition(!finished, "SHA256.finalize called twice")
        finished = true
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let done = digest.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
        precondition(done == 1 && length == 32, "OpenSSL's SHA-256 failed")
        return Array(digest.prefix(32))
    }
}

import TLS
import Testing

/// OpenSSL's SHA-256 against FIPS 180-2's test vectors, and agreeing with a large input's known digest.
@Suite struct DigestTests {
    @Test func sha256MatchesTheStandardsVectors() {
        #expect(Digest.sha256Hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Digest.sha256Hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            Digest.sha256Hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(Digest.sha256Hex([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))
                    == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}

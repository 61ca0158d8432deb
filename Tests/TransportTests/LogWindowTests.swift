import Testing

@testable import Connect
@testable import Framing
@testable import ServerCore
@testable import ServerSeam
@testable import TCP
@testable import TLSStreams
@testable import Transport

/// Warnings a client causes at will are logged once a window per kind (a one-second attack of plaintext
/// clients on a TLS-only port wrote 1,092 lines before), and the next line says how many were left out.
@Suite struct LogWindowTests {
    @Test func oneLineAWindowPerKindThenTheCountLeftOut() {
        let log = LogWindow(window: .seconds(60))
        let start = ContinuousClock.now
        #expect(log.admit("plaintext binary", at: start) == 0)
        for second in 1...1_000 {
            #expect(log.admit("plaintext binary", at: start + .milliseconds(second)) == nil)
        }
        // Another kind has its own window.
        #expect(log.admit("plaintext HTTP", at: start + .seconds(1)) == 0)
        // Once the window is over, one line again, telling what was left out.
        #expect(log.admit("plaintext binary", at: start + .seconds(61)) == 1_000)
        #expect(log.admit("plaintext binary", at: start + .seconds(62)) == nil)
        #expect(log.admit("plaintext HTTP", at: start + .seconds(62)) == 0)
    }
}

import ComposeKit
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The stack's private CAs and the certificates they sign (openssl, EC P-256: quick to make and to use).
struct Certificates {
    /// Where the CA and the certificates are (STATE/tls for the services', STATE/cluster/tls for the clusters').
    let directory: String
    /// The nodes' addresses (`,IP:…` each) certificates name beside loopback, with --nodes.
    var addresses = ""
    /// The OU certificates name (a cluster role: member, operator), none for the services' own TLS.
    var unit = ""

    /// A certificate for `name` signed by the CA, for loopback (where compose runs replicas) and the nodes'
    /// addresses, usable as server and client (services call each other). Kept when it exists.
    func issue(_ name: String) -> Bool {
        let dir = directory
        if Files.exists("\(dir)/\(name).pem"), Files.exists("\(dir)/\(name).key") { return true }
        guard
            (try? Files.write(
                "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\(addresses)\nextendedKeyUsage=serverAuth,clientAuth\n",
                to: "\(dir)/\(name).ext")) != nil
        else { return false }
        defer {
            Files.remove("\(dir)/\(name).csr")
            Files.remove("\(dir)/\(name).ext")
        }
        let subject = "/O=Menagerie" + (unit.isEmpty ? "" : "/OU=\(unit)") + "/CN=\(name)"
        guard
            Programs.run(
                [
                    "openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                    "\(dir)/\(name).key",
                    "-out", "\(dir)/\(name).csr", "-subj", subject,
                ], quiet: true) == 0
        else { return false }
        let days = ProcessInfo.processInfo.environment["MENAGERIE_TLS_DAYS"].flatMap { $0.isEmpty ? nil : $0 } ?? "365"
        guard
            Programs.run(
                [
                    "openssl", "x509", "-req", "-in", "\(dir)/\(name).csr", "-CA", "\(dir)/ca.pem", "-CAkey",
                    "\(dir)/ca.key", "-CAcreateserial",
                    "-days", days, "-extfile", "\(dir)/\(name).ext", "-out", "\(dir)/\(name).pem",
                ], quiet: true) == 0
        else { return false }
        chmod("\(dir)/\(name).key", 0o600)
        return true
    }

    /// The CA (made when missing, every certificate with it), readable by its owner only.
    func makeAuthority(subject: String) -> Bool {
        if Files.exists("\(directory)/ca.pem"), Files.exists("\(directory)/ca.key") { return true }
        for file in Files.list(directory) where file.hasSuffix(".pem") || file.hasSuffix(".key") {
            Files.remove("\(directory)/\(file)")
        }
        guard
            Programs.run(
                [
                    "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "\(directory)/ca.key",
                    "-out", "\(directory)/ca.pem", "-days", "3650", "-subj", subject,
                ], quiet: true) == 0
        else { return false }
        chmod("\(directory)/ca.key", 0o600)
        return true
    }

    /// compose up --tls: the stack's private CA (kept while the stack runs), a certificate per service and one for
    /// the gateway, which finds them in STATE/tls as it finds the endpoints.
    func makeStackCertificates(for names: [String]) throws(ComposeFailure) {
        guard Programs.run(["sh", "-c", "command -v openssl"], quiet: true) == 0 else {
            throw ComposeFailure("compose up --tls needs the openssl program (compose deps installs it)")
        }
        try Files.makeDirectory(directory)
        chmod(directory, 0o700)
        if !Files.exists("\(directory)/ca.pem") || !Files.exists("\(directory)/ca.key") {
            guard makeAuthority(subject: "/O=Menagerie/CN=Menagerie stack CA") else {
                throw ComposeFailure("openssl could not make the CA in \(directory)")
            }
            Compose.say("made a private CA in \(directory)")
        }
        for name in names where !issue(name) {
            throw ComposeFailure("openssl could not make \(name)'s certificate in \(directory)")
        }
    }
}

import GatewayKit
import RPC
import Testing

/// GatewayExit's one rule: bad values 3, usage errors 64 (issue 9, #13).
@Suite struct ExitCodeTests {
    @Test func valuesThatDoNotConvertAreBadValuesAndTheRestUsageErrors() {
        #expect(GatewayExit.code(parseExitCode: 64, message: "The value 'abc' is invalid for '<id>'") == 3)
        #expect(GatewayExit.code(parseExitCode: 64, message: "The value 'x' is invalid for '--radius <radius>'") == 3)
        #expect(GatewayExit.code(parseExitCode: 64, message: "Unknown option '-5'") == 3)
        #expect(GatewayExit.code(parseExitCode: 64, message: "Unknown option '-.5'") == 3)
        #expect(GatewayExit.code(parseExitCode: 1, message: "--timeout must be a number of seconds above 0") == 3)
        #expect(GatewayExit.code(parseExitCode: 64, message: "Unknown option '--bogus'") == 64)
        #expect(GatewayExit.code(parseExitCode: 64, message: "Unknown option '-x'") == 64)
        #expect(GatewayExit.code(parseExitCode: 64, message: "Missing value for '--from <from>'") == 64)
        #expect(GatewayExit.code(parseExitCode: 64, message: "Missing expected argument '<id>'") == 64)
        #expect(GatewayExit.code(parseExitCode: 0, message: "") == 0)
        // `zoo show -5`: ArgumentParser takes -5 for an option and misses the id.
        #expect(
            GatewayExit.code(
                parseExitCode: 64, message: "Missing expected argument '<id>'", arguments: ["zoo", "show", "-5"]) == 3)
        #expect(
            GatewayExit.code(
                parseExitCode: 64, message: "Missing expected argument '<id>'", arguments: ["zoo", "show", "--", "x"])
                == 64)
    }

    /// A second parse puts negative numbers that stand as arguments behind `--`, keeping the arguments' order and
    /// every option (with its value) before it.
    @Test func negativeNumbersAsArgumentsMoveBehindTheSeparator() {
        #expect(
            GatewayExit.negativeNumbersAsPositionals(["health", "add", "stepCount", "-100"]) == [
                "health", "add", "stepCount", "--", "-100",
            ])
        #expect(
            GatewayExit.negativeNumbersAsPositionals(["zoo", "tour", "1", "-2", "3", "--from", "-1.5,2", "--json"])
                == ["zoo", "tour", "1", "--from", "-1.5,2", "--json", "--", "-2", "3"])
        #expect(
            GatewayExit.negativeNumbersAsPositionals(["health", "add", "x", "-1", "--unit", "mL", "--", "y"])
                == ["health", "add", "x", "--unit", "mL", "--", "-1", "y"])
        // An option's value is no argument; nothing to move.
        #expect(GatewayExit.negativeNumbersAsPositionals(["zoo", "nearby", "--radius", "-5"]) == nil)
        #expect(GatewayExit.negativeNumbersAsPositionals(["zoo", "show", "--", "-5"]) == nil)
    }

    @Test func anUnknownServiceIsNotFoundAndAKnownOneWithoutInstancesUnavailable() throws {
        let endpoints = try Endpoints(flags: ["zoo=127.0.0.1:7100"], stateDirectory: nil, environment: [:])
        func failure(_ service: String, known: [String]) -> RPCError? {
            do {
                _ = try endpoints.client(for: service, known: known)
                return nil
            } catch {
                return error as? RPCError
            }
        }
        let unknown = failure("nosuch", known: ["zoo", "ocr"])
        #expect(
            unknown?.code == .notFound && unknown?.message.contains("zoo, ocr") == true,
            "\(String(describing: unknown))")
        #expect(failure("ocr", known: ["zoo", "ocr"])?.code == .unavailable)
        // Without a services file nothing says a name is unknown: UNAVAILABLE, as before.
        #expect(failure("nosuch", known: [])?.code == .unavailable)
    }
}

import AppleSignIn
import AppleSimulator
import Foundation
import Testing

/// The JWS header: `crit` is refused (siwa implements no extension), and
/// nothing an attacker puts in the header comes back in an answer or a
/// rejection row. Every token here carries a valid RS256 signature by
/// Apple's (the simulator's) published key.
@Suite("JWS header", .testDatabases)
struct JWSHeaderTests {
    /// `crit` naming any extension is refused; a `crit` that is not a
    /// non-empty list of strings is a malformed header.
    @Test func critIsRefused() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let key = siwa.simulator.currentKey
        let signer = siwa.simulator.signer
        func claims() -> [String: any Sendable] {
            TokenSigner.notificationClaims(type: "account-deleted", sub: "crit.\(UUID().uuidString)", audience: ServerHarness.clientID)
        }
        func header(_ extra: [String: any Sendable]) -> [String: any Sendable] {
            ["kid": key.kid, "alg": "RS256"].merging(extra) { $1 }
        }
        func raw(_ crit: String) -> Data { Data(#"{"alg":"RS256","kid":"\#(key.kid)","crit":\#(crit)}"#.utf8) }
        let cases: [(name: String, reason: String, token: String)] = [
            ("crit naming an extension it carries", "unsupported_crit",
             try signer.sign(header: header(["crit": ["x-siwa-ext"], "x-siwa-ext": true]), claims: claims(), key: key)),
            ("crit naming b64", "unsupported_crit",
             try signer.sign(header: header(["crit": ["b64"], "b64": false]), claims: claims(), key: key)),
            ("crit naming a registered claim", "unsupported_crit",
             try signer.sign(header: header(["crit": ["exp"]]), claims: claims(), key: key)),
            ("crit naming two", "unsupported_crit",
             try signer.sign(header: header(["crit": ["a", "b"], "a": 1, "b": 2]), claims: claims(), key: key)),
            ("crit empty", "malformed_header", try signer.sign(rawHeader: raw("[]"), claims: claims(), key: key)),
            ("crit a string", "malformed_header", try signer.sign(rawHeader: raw(#""b64""#), claims: claims(), key: key)),
            ("crit a number list", "malformed_header", try signer.sign(rawHeader: raw("[1]"), claims: claims(), key: key)),
            ("crit mixed list", "malformed_header", try signer.sign(rawHeader: raw(#"["b64",null]"#), claims: claims(), key: key)),
            ("crit null", "malformed_header", try signer.sign(rawHeader: raw("null"), claims: claims(), key: key)),
            ("crit an object", "malformed_header", try signer.sign(rawHeader: raw(#"{"b64":true}"#), claims: claims(), key: key)),
        ]
        for hostile in cases {
            let answer = try await siwa.post(token: hostile.token)
            #expect(answer.status == 400, "\(hostile.name): \(answer.status) \(answer.text.prefix(200))")
            #expect(answer.reason == hostile.reason, "\(hostile.name): \(answer.text.prefix(200))")
        }
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.notifications") == 0)
        // The same token without crit is fine: the refusal was the crit.
        let plain = try signer.sign(header: header([:]), claims: claims(), key: key)
        #expect(try await siwa.post(token: plain).status == 200)
    }

    /// alg with a NUL, with invalid UTF-8, with a lone surrogate, with
    /// markup; an overlong kid; a kid of control characters: each is a 400
    /// with a clean reason, and neither the answer nor the recorded detail
    /// holds any of those bytes (both are printable ASCII).
    @Test func noAttackerBytesAreEchoed() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let key = siwa.simulator.currentKey
        let signer = siwa.simulator.signer
        let claims = TokenSigner.notificationClaims(type: "account-deleted", sub: "echo.sub", audience: ServerHarness.clientID)
        func raw(_ bytes: [UInt8]) -> Data { Data(bytes) }
        let kidJSON = Array(#""kid":"\#(key.kid)""#.utf8)
        let longKid = "ECHOKID" + String(repeating: "K", count: 10 * 1024)
        let cases: [(name: String, reasons: Set<String>, token: String, marker: [UInt8])] = [
            ("alg with a NUL", ["unsupported_alg"],
             try signer.sign(header: ["kid": key.kid, "alg": "RS256\u{0}ECHO"], claims: claims, key: key), Array("ECHO".utf8)),
            ("alg of markup", ["unsupported_alg"],
             try signer.sign(header: ["kid": key.kid, "alg": "<b>ECHO\"'\\"], claims: claims, key: key), Array("ECHO".utf8)),
            ("alg of control characters", ["unsupported_alg"],
             try signer.sign(header: ["kid": key.kid, "alg": "\u{1B}[31mECHO\r\n"], claims: claims, key: key), Array("ECHO".utf8)),
            ("alg with a raw 0xFF byte", ["malformed_header", "unsupported_alg"],
             try signer.sign(rawHeader: raw(Array(#"{"alg":"RS"#.utf8) + [0xFF] + Array(#"ECHO","#.utf8) + kidJSON + [0x7D]),
                             claims: claims, key: key), Array("ECHO".utf8)),
            ("alg a lone surrogate", ["malformed_header", "unsupported_alg"],
             try signer.sign(rawHeader: raw(Array(#"{"alg":"\udc00ECHO","#.utf8) + kidJSON + [0x7D]), claims: claims, key: key),
             Array("ECHO".utf8)),
            ("kid of 10 KiB", ["malformed_header"],
             try signer.sign(header: ["kid": longKid, "alg": "RS256"], claims: claims, key: key), Array("ECHOKID".utf8)),
            ("kid of control characters", ["unknown_kid", "unavailable"],
             try signer.sign(header: ["kid": "\u{0}\u{7}ECHO\u{1B}", "alg": "RS256"], claims: claims, key: key), Array("ECHO".utf8)),
        ]
        var refused = 0
        for hostile in cases {
            let answer = try await siwa.post(token: hostile.token)
            let reason = answer.reason ?? "none"
            #expect(hostile.reasons.contains(reason), "\(hostile.name): \(answer.status) \(answer.text.prefix(200))")
            #expect([400, 503].contains(answer.status), "\(hostile.name): \(answer.status)")
            if answer.status == 400 { refused += 1 }
            #expect(answer.body.allSatisfy { (0x20...0x7E).contains($0) }, "\(hostile.name): the answer holds other than printable ASCII")
            #expect(!Self.contains(answer.body, hostile.marker), "\(hostile.name): the answer echoes the header")
            #expect(!answer.text.contains("\\u00"), "\(hostile.name): the answer echoes control characters")
        }
        // Each 400 left a rejection row whose detail is clean too (written
        // by the rejection writer's next batch, shortly after the answer).
        let written = try await eventually(upTo: .seconds(10)) {
            try await siwa.database.scalar("SELECT count(*) FROM siwa.rejected_notifications") >= refused
        }
        #expect(written)
        let details = try await siwa.database.strings("SELECT coalesce(detail, '') FROM siwa.rejected_notifications")
        #expect(details.count == refused)
        for detail in details {
            #expect(!detail.contains("ECHO"), "\(detail)")
            #expect(detail.utf8.allSatisfy { (0x20...0x7E).contains($0) }, "\(detail)")
        }
    }

    /// `detail` is printable ASCII of bounded length whatever a case carries.
    @Test func everyDetailIsPrintableASCII() {
        let nasty = "a\u{0}b\u{1B}c\"d\\e\u{FFFD}f\u{10FFFF}g" + String(repeating: "x", count: 1000)
        let failures: [VerificationFailure] = [
            .malformedToken(nasty), .malformedHeader(nasty), .unsupportedAlgorithm(nasty), .malformedClaims(nasty),
            .malformedEvents(nasty), .malformedIdentityClaims(nasty), .unsupportedAlgorithm("RS512"),
        ]
        for failure in failures {
            let detail = failure.detail
            #expect(detail.utf8.count <= VerificationFailure.maximumDetailBytes)
            #expect(detail.utf8.allSatisfy { (0x20...0x7E).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }, "\(detail)")
        }
        #expect(VerificationFailure.unsupportedAlgorithm(nasty).detail.contains("x") == false)
        #expect(VerificationFailure.unsupportedAlgorithm("RS512").detail.contains("RS512"))
    }

    static func contains(_ data: Data, _ marker: [UInt8]) -> Bool {
        guard !marker.isEmpty, data.count >= marker.count else { return false }
        let bytes = [UInt8](data)
        return (0...(bytes.count - marker.count)).contains { Array(bytes[$0..<($0 + marker.count)]) == marker }
    }
}

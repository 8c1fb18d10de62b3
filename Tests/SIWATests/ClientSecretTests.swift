import AppleSignIn
import Crypto
import Foundation
import JWTKit
import Synchronization
import Testing

/// The client secret of Apple's token endpoints: loaded from a `.p8`,
/// exactly Apple's header and claims, an ES256 signature that two verifiers
/// other than siwa's own accept (openssl, jwt-kit), cached and renewed.
@Suite("Apple client secret")
struct ClientSecretTests {
    static let teamID = "TEAM123456"
    static let keyID = "ABC123DEFG"

    /// A `.p8` in a fresh directory, as Apple hands it out.
    static func writeP8(_ contents: String, directory: URL? = nil, name: String = "AuthKey_\(keyID).p8") throws -> String {
        let directory = try directory ?? OpenSSL.temporaryDirectory()
        let path = directory.appendingPathComponent(name).path
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    static func segments(_ secret: String) throws -> (header: Data, claims: [String: Any], signingInput: String, signature: Data) {
        let parts = secret.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        let header = try #require(Base64URL.decode(parts[0]))
        let claimsData = try #require(Base64URL.decode(parts[1]))
        let claims = try #require(try JSONSerialization.jsonObject(with: claimsData) as? [String: Any])
        return (header, claims, "\(parts[0]).\(parts[1])", try #require(Base64URL.decode(parts[2])))
    }

    @Test func swiftCryptoWritesPKCS8LikeApple() {
        let pem = P256.Signing.PrivateKey().pemRepresentation
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(pem.hasSuffix("-----END PRIVATE KEY-----"))
    }

    @Test func headerAndClaimsAreExactlyApples() throws {
        let key = try AppleClientSecretKey.load(p8Path: try Self.writeP8(P256.Signing.PrivateKey().pemRepresentation),
                                                teamID: Self.teamID, keyID: Self.keyID)
        let secret = try AppleClientSecret.make(key: key, clientID: "com.example.app",
                                                issuedAt: Date(timeIntervalSince1970: 1_800_000_000.9), lifetime: .seconds(3600))
        let (header, claims, _, signature) = try Self.segments(secret)
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        #expect(claims.count == 5, "\(claims.keys.sorted())")
        #expect(claims["iss"] as? String == Self.teamID)
        #expect(claims["sub"] as? String == "com.example.app")
        #expect(claims["aud"] as? String == "https://appleid.apple.com")
        #expect((claims["iat"] as? NSNumber)?.int64Value == 1_800_000_000)
        #expect((claims["exp"] as? NSNumber)?.int64Value == 1_800_003_600)
        #expect(signature.count == 64, "JOSE R‖S, not DER")
    }

    /// openssl checks the signature of a secret made from a `.p8` that
    /// openssl generated (PKCS#8, as Apple's), with the public key openssl
    /// derived from it; a changed byte fails, so the check can fail.
    @Test func opensslVerifiesTheSignature() async throws {
        let directory = try OpenSSL.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let generated = try await OpenSSL.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                                               "-out", "AuthKey_\(Self.keyID).p8"], in: directory)
        try #require(generated.status == 0, "\(generated.output)")
        let derived = try await OpenSSL.run(["pkey", "-in", "AuthKey_\(Self.keyID).p8", "-pubout", "-out", "pub.pem"], in: directory)
        try #require(derived.status == 0, "\(derived.output)")
        let p8 = directory.appendingPathComponent("AuthKey_\(Self.keyID).p8").path
        #expect(try String(contentsOfFile: p8, encoding: .utf8).hasPrefix("-----BEGIN PRIVATE KEY-----"))

        let key = try AppleClientSecretKey.load(p8Path: p8, teamID: Self.teamID, keyID: Self.keyID)
        let (_, _, input, signature) = try Self.segments(try AppleClientSecret.make(key: key, clientID: "app", issuedAt: Date()))
        try Data(input.utf8).write(to: directory.appendingPathComponent("input"))
        try Data((input + "x").utf8).write(to: directory.appendingPathComponent("tampered"))
        try OpenSSL.derSignature(rawRS: signature).write(to: directory.appendingPathComponent("sig.der"))

        let good = try await OpenSSL.run(["dgst", "-sha256", "-verify", "pub.pem", "-signature", "sig.der", "input"], in: directory)
        #expect(good.status == 0 && good.output.contains("Verified OK"), "\(good.output)")
        let bad = try await OpenSSL.run(["dgst", "-sha256", "-verify", "pub.pem", "-signature", "sig.der", "tampered"], in: directory)
        #expect(bad.status != 0 && !bad.output.contains("Verified OK"), "\(bad.output)")
    }

    struct SecretClaims: JWTPayload {
        let iss: IssuerClaim
        let sub: SubjectClaim
        let aud: AudienceClaim
        let iat: IssuedAtClaim
        let exp: ExpirationClaim

        func verify(using algorithm: some JWTAlgorithm) async throws {
            try exp.verifyNotExpired()
            try aud.verifyIntendedAudience(includes: "https://appleid.apple.com")
        }
    }

    /// jwt-kit, a second library, verifies the secret with the public key
    /// (and refuses it with another key).
    @Test func jwtKitVerifiesTheSignature() async throws {
        let privateKey = P256.Signing.PrivateKey()
        let key = try AppleClientSecretKey.load(p8Path: try Self.writeP8(privateKey.pemRepresentation),
                                                teamID: Self.teamID, keyID: Self.keyID)
        let secret = try AppleClientSecret.make(key: key, clientID: "com.example.app", issuedAt: Date())

        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PublicKey(pem: privateKey.publicKey.pemRepresentation), kid: JWKIdentifier(string: Self.keyID))
        let claims = try await keys.verify(secret, as: SecretClaims.self)
        #expect(claims.iss.value == Self.teamID)
        #expect(claims.sub.value == "com.example.app")
        #expect(claims.exp.value.timeIntervalSince(claims.iat.value) == 3600)

        let others = JWTKeyCollection()
        await others.add(ecdsa: try ES256PublicKey(pem: P256.Signing.PrivateKey().publicKey.pemRepresentation),
                         kid: JWKIdentifier(string: Self.keyID))
        await #expect(throws: (any Error).self) { try await others.verify(secret, as: SecretClaims.self) }
    }

    /// Each unusable file gives one line that names the file and what is
    /// wrong, and quotes nothing of its content.
    @Test func unusableKeyFilesGiveOneLineErrors() throws {
        let directory = try OpenSSL.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let p384 = P384.Signing.PrivateKey().pemRepresentation
        let cases: [(path: String, expected: String)] = [
            (directory.appendingPathComponent("missing.p8").path, "no such file"),
            (directory.path, "is a directory"),
            (try Self.writeP8("this is not a key at all\n", directory: directory, name: "text.p8"), "not a PEM file"),
            (try Self.writeP8(p384, directory: directory, name: "p384.p8"), "not a P-256 private key"),
            (try Self.writeP8(P384.Signing.PrivateKey().derRepresentation.base64EncodedString(), directory: directory, name: "bare.p8"),
             "not a PEM file"),
            (try Self.writeP8("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", directory: directory, name: "cert.p8"),
             "holds a PEM CERTIFICATE"),
            (try Self.writeP8("-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n", directory: directory,
                              name: "garbage.p8"), "not a P-256 private key"),
            (try Self.writeP8(String(repeating: "A", count: 70_000), directory: directory, name: "huge.p8"), "too large"),
        ]
        for (path, expected) in cases {
            let error = #expect(throws: AppleClientSecretError.self) {
                try AppleClientSecretKey.load(p8Path: path, teamID: Self.teamID, keyID: Self.keyID)
            }
            let line = error?.description ?? ""
            #expect(line.hasPrefix(path + ": ") && line.contains(expected), "\(line)")
            #expect(!line.contains("\n"), "\(line)")
            #expect(!line.contains("MI") && !line.contains("bm90"), "quotes the file: \(line)")
        }
    }

    @Test func aLoadedKeyPrintsNoKeyMaterial() throws {
        let privateKey = P256.Signing.PrivateKey()
        let key = try AppleClientSecretKey.load(p8Path: try Self.writeP8(privateKey.pemRepresentation),
                                                teamID: Self.teamID, keyID: Self.keyID)
        var dumped = ""
        dump(key, to: &dumped)
        let raw = privateKey.rawRepresentation
        for text in [String(describing: key), String(reflecting: key), dumped] {
            #expect(text.contains(Self.keyID))
            #expect(!text.contains(raw.base64EncodedString()) && !text.contains(Base64URL.encode(raw)), "\(text)")
            #expect(!text.contains("rawRepresentation") && !text.contains("privateKey"), "\(text)")
        }
    }

    @Test func lifetimeIsBetweenAMinuteAndSixMonths() throws {
        let key = AppleClientSecretKey(teamID: Self.teamID, keyID: Self.keyID, privateKey: P256.Signing.PrivateKey())
        let secret = try AppleClientSecret.make(key: key, clientID: "app", issuedAt: Date(), lifetime: .seconds(15_777_000))
        let claims = try Self.segments(secret).claims
        #expect(((claims["exp"] as? NSNumber)?.int64Value ?? 0) - ((claims["iat"] as? NSNumber)?.int64Value ?? 0) == 15_777_000)
        for lifetime: Duration in [.seconds(15_777_001), .seconds(59), .milliseconds(90_500), .zero] {
            #expect(throws: AppleClientSecretError.self, "\(lifetime)") {
                try AppleClientSecret.make(key: key, clientID: "app", issuedAt: Date(), lifetime: lifetime)
            }
            #expect(throws: AppleClientSecretError.self, "\(lifetime)") {
                try ClientSecretProvider(key: key, lifetime: lifetime)
            }
        }
    }

    final class TestClock: Sendable {
        private let time: Mutex<Date>
        init(_ start: Date) { time = Mutex(start) }
        var now: Date { time.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { time.withLock { $0 += seconds } }
    }

    /// One secret per client id, reused until a quarter of an hour's
    /// lifetime remains, then a new one (and a new one when the clock reads
    /// before the cached secret's iat).
    @Test func theProviderCachesOneSecretPerClientAndRenewsIt() throws {
        let key = AppleClientSecretKey(teamID: Self.teamID, keyID: Self.keyID, privateKey: P256.Signing.PrivateKey())
        let clock = TestClock(Date(timeIntervalSince1970: 1_800_000_000))
        let provider = try ClientSecretProvider(key: key, lifetime: .seconds(3600), now: { clock.now })
        #expect(provider.renewalMargin == .seconds(900))

        let first = try provider.secret(for: "app")
        #expect(try provider.secret(for: "app") == first)
        let other = try provider.secret(for: "web")
        #expect(other != first)
        #expect(try Self.segments(other).claims["sub"] as? String == "web")

        clock.advance(2699)
        #expect(try provider.secret(for: "app") == first)
        clock.advance(1)
        let renewed = try provider.secret(for: "app")
        #expect(renewed != first)
        #expect((try Self.segments(renewed).claims["iat"] as? NSNumber)?.int64Value == 1_800_002_700)
        #expect(try provider.secret(for: "app") == renewed)

        clock.advance(-60)
        let afterSetBack = try provider.secret(for: "app")
        #expect(afterSetBack != renewed)
        #expect((try Self.segments(afterSetBack).claims["iat"] as? NSNumber)?.int64Value == 1_800_002_640)
    }
}

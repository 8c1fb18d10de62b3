import AccountStore
import Foundation
import PostgresNIO
import Testing

/// The key ring that encrypts Apple's tokens at rest: AES-256-GCM bound to
/// its row, rotation, and the key ring file's one-line errors.
@Suite("Token key ring")
struct TokenKeyRingTests {
    static func randomKey() -> Data { Data((0..<32).map { _ in UInt8.random(in: 0...255) }) }

    /// One random key per id for the whole test process, so `ring("new", "old")`
    /// and `ring("old")` share the old key.
    static let keys = ["old": randomKey(), "new": randomKey(), "other": randomKey()]

    static func ring(_ ids: String...) throws -> TokenKeyRing {
        try TokenKeyRing(keys: ids.map { ($0, keys[$0] ?? Data()) })
    }

    let token = "r1a2b3c4d5e6f7.0.mrtqw.SECRET-refresh-token-value"

    @Test func sealThenOpenGivesThePlaintextBack() throws {
        let ring = try Self.ring("new")
        let sealed = try ring.seal(token, userID: 42, clientID: "com.example.app")
        #expect(sealed.keyID == "new")
        #expect(sealed.bytes.count == 12 + token.utf8.count + 16)
        #expect(try ring.open(sealed, userID: 42, clientID: "com.example.app") == token)
        #expect(!"\(sealed)".contains(token) && !String(reflecting: sealed).contains(token))
        #expect(try ring.open(ring.seal("", userID: 1, clientID: "c"), userID: 1, clientID: "c") == "")
    }

    @Test func everySealHasAFreshNonce() throws {
        let ring = try Self.ring("new")
        let first = try ring.seal(token, userID: 42, clientID: "com.example.app")
        let second = try ring.seal(token, userID: 42, clientID: "com.example.app")
        #expect(first.bytes != second.bytes)
        #expect(first.bytes.prefix(12) != second.bytes.prefix(12))
    }

    @Test func aCiphertextMovedToAnotherRowDoesNotOpen() throws {
        let ring = try Self.ring("new", "other")
        let sealed = try ring.seal(token, userID: 42, clientID: "com.example.app")
        for (user, client) in [(Int64(43), "com.example.app"), (42, "com.example.web"), (-42, "com.example.app"), (42, "com.example.app\u{0}")] {
            #expect(throws: TokenKeyRingError.notThisRow) { try ring.open(sealed, userID: user, clientID: client) }
        }
        // Relabelled with the ring's other key, or altered by one bit.
        #expect(throws: TokenKeyRingError.notThisRow) {
            try ring.open(SealedToken(keyID: "other", bytes: sealed.bytes), userID: 42, clientID: "com.example.app")
        }
        var altered = sealed.bytes
        altered[20] ^= 1
        #expect(throws: TokenKeyRingError.notThisRow) {
            try ring.open(SealedToken(keyID: "new", bytes: altered), userID: 42, clientID: "com.example.app")
        }
        #expect(throws: TokenKeyRingError.notThisRow) {
            try ring.open(SealedToken(keyID: "new", bytes: Data([1, 2, 3])), userID: 42, clientID: "com.example.app")
        }
        #expect("\(TokenKeyRingError.notThisRow)".contains("does not belong to this row"))
    }

    @Test func aRotatedRingOpensOldTokensAndSealsWithTheNewKey() throws {
        let old = try Self.ring("old")
        let rotated = try Self.ring("new", "old")
        let sealedBefore = try old.seal(token, userID: 7, clientID: "com.example.app")
        #expect(try rotated.open(sealedBefore, userID: 7, clientID: "com.example.app") == token)
        let sealedAfter = try rotated.seal(token, userID: 7, clientID: "com.example.app")
        #expect(sealedAfter.keyID == "new" && rotated.currentKeyID == "new")
        #expect(throws: TokenKeyRingError.unknownKey(id: "new")) { try old.open(sealedAfter, userID: 7, clientID: "com.example.app") }
        let unknown = "\(TokenKeyRingError.unknownKey(id: "new"))"
        #expect(unknown.contains("'new'") && !unknown.contains(token))
    }

    // MARK: the key ring file

    static func write(_ text: String, mode: Int = 0o600) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-keys-\(UUID().uuidString)").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    @Test func aGoodFileLoadsWithCommentsAndBlankLinesAndTheFirstKeySeals() throws {
        let new = Self.randomKey().base64EncodedString(), old = Self.randomKey().base64EncodedString()
        let path = try Self.write("# rotated 2026-11-23\n\nk2: \(new)\r\n  k1:\(old)  \n\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (ring, warning) = try TokenKeyRing.load(path: path)
        #expect(ring.keyIDs == ["k2", "k1"] && ring.currentKeyID == "k2")
        #expect(warning == nil)
    }

    static let good = Data(repeating: 7, count: 32).base64EncodedString()
    static let short = Data(repeating: 9, count: 31).base64EncodedString()

    /// (file text, the line the error names (nil: the file), words the error must hold, key text it must not hold)
    static let malformed: [(String, Int?, String, String?)] = [
        ("k1:\(good)\nk2:not*base64!!\n", 2, "not valid base64", "not*base64"),
        ("# one\nk1:\(short)\n", 2, "31 bytes", short),
        ("k1:\(good)\n\nk1:\(good)\n", 3, "already on line 1", good),
        ("", nil, "holds no key", nil),
        ("# only a comment\n\n", nil, "holds no key", nil),
        ("k1:\(good)\n\(good)\n", 2, "no ':'", good),
        ("bad id!:\(good)\n", 1, "key id is 1 to 32", good),
        ("\(String(repeating: "a", count: 33)):\(good)\n", 1, "key id is 1 to 32", good),
        ("k1:\n", 1, "no key after ':'", nil),
    ]

    @Test(arguments: malformed.indices)
    func aMalformedFileIsRefusedWithOneLineNamingTheLine(_ index: Int) throws {
        let (text, line, words, secret) = Self.malformed[index]
        let path = try Self.write(text)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try TokenKeyRing.load(path: path)
            Issue.record("loaded: case \(index)")
        } catch {
            let message = "\(error)"
            #expect(message.hasPrefix(path + (line.map { " line \($0):" } ?? ":")), "\(message)")
            #expect(message.contains(words), "\(message)")
            if let secret { #expect(!message.contains(secret), "\(message)") }
            #expect(!message.contains("\n"), "\(message)")
        }
    }

    @Test func aMissingFileIsNamed() throws {
        #expect(throws: TokenKeyRingError.file(path: "/nonexistent/siwa-keys", line: nil, problem: "cannot read it (no such file)")) {
            try TokenKeyRing.load(path: "/nonexistent/siwa-keys")
        }
    }

    @Test func aFileOthersCanReadGivesAWarning() throws {
        let path = try Self.write("k1:\(Self.good)\n", mode: 0o644)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (_, warning) = try TokenKeyRing.load(path: path)
        let text = try #require(warning)
        #expect(text.contains(path) && text.contains("644") && !text.contains(Self.good))
        let groupOnly = try Self.write("k1:\(Self.good)\n", mode: 0o640)
        defer { try? FileManager.default.removeItem(atPath: groupOnly) }
        #expect(try TokenKeyRing.load(path: groupOnly).warning != nil)
    }

    @Test func keygenPrintsALineTheRingLoads() async throws {
        let named = try await runSIWA(["tokens", "keygen", "--id", "k2"])
        #expect(named.status == 0, "\(named.output)")
        let line = named.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line.hasPrefix("k2:") && !line.contains("\n"))
        #expect(try TokenKeyRing.parse(line, path: "keygen").keyIDs == ["k2"])

        // The default id: today's date and the first letter the ring does not use.
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd"
        let stem = "k" + formatter.string(from: Date())
        let path = try Self.write("\(stem)a:\(Self.good)\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let next = try await runSIWA(["tokens", "keygen"], environment: ["SIWA_TOKEN_ENCRYPTION_KEYS_FILE": path])
        #expect(next.output.hasPrefix("\(stem)b:"), "\(next.output)")
        #expect(try await runSIWA(["tokens", "keygen", "--id", "bad id"]).status != 0)
    }
}

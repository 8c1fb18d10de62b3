import Foundation

/// A JWS in compact serialization, split and decoded but not yet verified.
struct CompactJWS: Sendable {
    struct Header: Decodable, Sendable {
        let alg: String?
        let kid: String?
        // jku, x5u, jwk, x5c are deliberately not decoded: keys only ever come
        // from the configured JWKS URL, never from the token itself.
    }

    let header: Header
    let payload: Data
    /// `base64url(header) "." base64url(payload)`, the bytes the signature covers.
    let signingInput: Data
    let signature: Data

    /// Longest token we even try to parse; Apple's are about 1 KiB.
    static let maximumLength = 16 * 1024

    init(_ token: String) throws(VerificationFailure) {
        // Trim ASCII white space by hand: Foundation's trimming bridges to NSString.
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\n" || $0 == "\r" || $0 == "\t" }
        var start = token.startIndex
        var end = token.endIndex
        while start < end, isSpace(token[start]) { start = token.index(after: start) }
        while end > start, isSpace(token[token.index(before: end)]) { end = token.index(before: end) }
        let trimmed = token[start..<end]
        guard !trimmed.isEmpty else { throw .malformedToken("empty") }
        guard trimmed.utf8.count <= Self.maximumLength else { throw .malformedToken("longer than \(Self.maximumLength) bytes") }
        let parts = trimmed.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformedToken("expected 3 segments, found \(parts.count)") }
        guard let headerData = Base64URL.decode(parts[0]) else { throw .malformedToken("header is not base64url") }
        guard let payload = Base64URL.decode(parts[1]), !payload.isEmpty else { throw .malformedToken("payload is not base64url") }
        guard let signature = Base64URL.decode(parts[2]) else { throw .malformedToken("signature is not base64url") }
        do {
            self.header = try JSONDecoder().decode(Header.self, from: headerData)
        } catch {
            throw .malformedHeader("not a JSON object with string alg/kid")
        }
        self.payload = payload
        self.signingInput = Data(parts[0].utf8) + Data(".".utf8) + Data(parts[1].utf8)
        self.signature = signature
    }
}

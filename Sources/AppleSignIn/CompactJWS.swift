import Foundation

/// A JWS in compact serialization, split and decoded but not yet verified.
struct CompactJWS: Sendable {
    struct Header: Decodable, Sendable {
        let alg: String?
        let kid: String?
        /// `typ` when it is a string (RFC 7515 §4.1.9 makes it optional and
        /// advisory; nil for anything else, so no token is refused over it).
        let typ: String?
        /// `crit` (RFC 7515 §4.1.11): the extensions the token says must be
        /// understood; nil when absent. Present, it must be a non-empty list
        /// of strings, else the header does not decode.
        let critical: [String]?
        // jku, x5u, jwk, x5c are deliberately not decoded: keys only ever come
        // from the configured JWKS URL, never from the token itself.

        enum CodingKeys: String, CodingKey {
            case alg, kid, typ
            case critical = "crit"
        }

        /// As `init(from:)` decodes it, from a header of plain members;
        /// nil for one that names `crit` (JSONDecoder judges it).
        init?(plain object: PlainJSONObject) {
            guard object["crit"] == nil, case let alg? = object.optionalString("alg"), case let kid? = object.optionalString("kid")
            else { return nil }
            self.alg = alg
            self.kid = kid
            if case .string(let typ)? = object["typ"] { self.typ = typ } else { typ = nil }
            critical = nil
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            alg = try container.decodeIfPresent(String.self, forKey: .alg)
            kid = try container.decodeIfPresent(String.self, forKey: .kid)
            typ = try? container.decodeIfPresent(String.self, forKey: .typ)
            if container.contains(.critical) {
                let list = try? container.decode([String].self, forKey: .critical)
                guard let list, !list.isEmpty else { throw CritError() }
                critical = list
            } else {
                critical = nil
            }
        }
    }

    private struct CritError: Error {}

    let header: Header
    let payload: Data
    /// `base64url(header) "." base64url(payload)`, the bytes the signature covers.
    let signingInput: Data
    let signature: Data

    /// Longest token we even try to parse; Apple's are about 1 KiB.
    static let maximumLength = 16 * 1024

    init(_ token: String) throws(VerificationFailure) {
        // Over the UTF-8 bytes: String's Character-level split and trim cost
        // more than the RSA check (15% of a request's CPU when measured).
        var token = token
        let parsed = token.withUTF8 { bytes in
            Result { () throws(VerificationFailure) -> CompactJWS in try CompactJWS(utf8: bytes) }
        }
        self = try parsed.get()
    }

    private init(utf8 token: UnsafeBufferPointer<UInt8>) throws(VerificationFailure) {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        var start = 0
        var end = token.count
        while start < end, isSpace(token[start]) { start += 1 }
        while end > start, isSpace(token[end - 1]) { end -= 1 }
        guard start < end else { throw .malformedToken("empty") }
        guard end - start <= Self.maximumLength else { throw .malformedToken("longer than \(Self.maximumLength) bytes") }
        let trimmed = UnsafeBufferPointer(rebasing: token[start..<end])
        var dots: [Int] = []
        for (index, byte) in trimmed.enumerated() where byte == UInt8(ascii: ".") {
            dots.append(index)
            if dots.count > 2 { break }
        }
        guard dots.count == 2 else {
            let segments = dots.count + 1 + (dots.count > 2 ? trimmed[(dots[2] + 1)...].count { $0 == UInt8(ascii: ".") } : 0)
            throw .malformedToken("expected 3 segments, found \(segments)")
        }
        let headerBytes = UnsafeBufferPointer(rebasing: trimmed[..<dots[0]])
        let payloadBytes = UnsafeBufferPointer(rebasing: trimmed[(dots[0] + 1)..<dots[1]])
        let signatureBytes = UnsafeBufferPointer(rebasing: trimmed[(dots[1] + 1)...])
        guard let headerData = Base64URL.decode(bytes: headerBytes) else { throw .malformedToken("header is not base64url") }
        guard let payload = Base64URL.decode(bytes: payloadBytes), !payload.isEmpty else { throw .malformedToken("payload is not base64url") }
        guard let signature = Base64URL.decode(bytes: signatureBytes) else { throw .malformedToken("signature is not base64url") }
        if let header = headerData.withUnsafeBytes({ PlainJSONObject($0) }).flatMap(Header.init(plain:)) {
            self.header = header
        } else {
            do {
                self.header = try JSONDecoder().decode(Header.self, from: headerData)
            } catch is CritError {
                throw .malformedHeader("crit is not a non-empty list of strings")
            } catch {
                throw .malformedHeader("not a JSON object with string alg/kid")
            }
        }
        self.payload = payload
        self.signingInput = Data(UnsafeBufferPointer(rebasing: trimmed[..<dots[1]]))
        self.signature = signature
    }
}

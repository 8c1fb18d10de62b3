import Crypto
import CryptoExtras
import Foundation

/// An RSA-2048 signing key of the simulated Apple, with its `kid`.
public struct SimulatedKey: Sendable {
    public let kid: String
    public let privateKey: _RSA.Signing.PrivateKey

    public init(kid: String) throws {
        self.kid = kid
        self.privateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
    }

    /// The public half as a JWK, shaped like Apple's.
    public var jwk: [String: String] {
        let primitives = (try? privateKey.publicKey.getKeyPrimitives())
        return [
            "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
            "n": primitives.map { Base64URLEncoding.encode($0.modulus) } ?? "",
            "e": primitives.map { Base64URLEncoding.encode($0.publicExponent) } ?? "",
        ]
    }

    /// RS256 over `signingInput`.
    public func sign(_ signingInput: Data) throws -> Data {
        try privateKey.signature(for: SHA256.hash(data: signingInput), padding: .insecurePKCS1v1_5).rawRepresentation
    }
}

/// base64url without padding. (The simulator does not import siwa's own
/// layers: it stands in for Apple, so it must not share siwa's code.)
public enum Base64URLEncoding {
    public static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

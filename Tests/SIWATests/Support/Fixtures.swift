import Foundation

/// Genuine Apple-signed tokens and Apple's key sets, carried under
/// Tests/SIWATests/Fixtures (see its README).
enum Fixtures {
    struct RealToken: Sendable {
        let file: String
        let token: String
        let jwks: Data
        let kind: String  // "notification" or "id_token"
        let kid: String
        let aud: String
        let iat: Double
        let exp: Double
        let eventType: String?
        let eventSub: String?
    }

    static let directory: URL = Bundle.module.resourceURL!.appendingPathComponent("Fixtures")

    static func data(_ path: String) throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent(path))
    }

    static func realTokens() throws -> [RealToken] {
        let manifest = try JSONSerialization.jsonObject(with: data("real-tokens/MANIFEST.json")) as? [[String: Any]] ?? []
        return try manifest.map { entry in
            let file = entry["file"] as? String ?? ""
            let object = try JSONSerialization.jsonObject(with: data("real-tokens/\(file)")) as? [String: Any] ?? [:]
            let token = object["token"] as? String ?? ""
            let jwks = try JSONSerialization.data(withJSONObject: object["jwks"] ?? [:])
            let claims = try unverifiedClaims(token)
            let event = entry["event"] as? [String: Any]
            return RealToken(
                file: file, token: token, jwks: jwks, kind: entry["kind"] as? String ?? "",
                kid: entry["kid"] as? String ?? "", aud: entry["aud"] as? String ?? "",
                iat: (claims["iat"] as? NSNumber)?.doubleValue ?? 0, exp: (claims["exp"] as? NSNumber)?.doubleValue ?? 0,
                eventType: event?["type"] as? String, eventSub: event?["sub"] as? String
            )
        }
    }

    static func jwksSnapshot(_ name: String) throws -> Data { try data("jwks/\(name)") }

    static func unverifiedClaims(_ token: String) throws -> [String: Any] {
        let parts = token.split(separator: ".")
        var base64 = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { return [:] }
        return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    }
}

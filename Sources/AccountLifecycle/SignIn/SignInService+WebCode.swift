import AccountStore
import AppleSignIn
import Crypto
import Foundation

extension SignInService {
    /// A web client's sign-in with the authorization code only (Sign in
    /// with Apple JS with `response_type=code`): what can be refused is
    /// refused before Apple is called; then the code is exchanged and the
    /// `id_token` of Apple's answer verified as an identity token is, its
    /// `aud` the request's `client_id`, its nonce the request's.
    func signIn(code: String, _ request: SignInAttempt, apiKeyName: String) async throws -> SignInOutcome {
        guard let clientID = request.clientID, !clientID.isEmpty else {
            return .refused(reason: "client_id_required",
                            detail: "an authorization_code without identity_token must come with the client_id it was issued to (the Services ID)")
        }
        guard verifier.accepts(audience: clientID), let team = clients.team(of: clientID) else {
            return .refused(reason: "wrong_aud", detail: "client_id is not one of the configured client ids (SIWA_APPLE_CLIENT_IDS)")
        }
        if let refusal = clients.web.refusal(clientID: clientID, redirectURI: request.redirectURI) { return refusal }
        let codeHash = Data(SHA256.hash(data: Data(code.utf8)))
        let tokens: AppleTokenResponse
        switch try await exchange(code: code, clientID: clientID, redirectURI: request.redirectURI, codeHash: codeHash, replaying: { earlier in
            // A retry of a stored sign-in. Without the app's token its first
            // answer's time is unknown: taken as the earliest it can be (the
            // replay window's start), so that a revocation or an ended
            // session since then makes the retry stale rather than signed in.
            let earliest = Date().addingTimeInterval(-Double(SignInStore.replayWindowSeconds))
            return try await answer(replaying: earlier, sub: earlier.appleSub, team: team, signedInAt: earliest)
        }) {
        case .tokens(let response): tokens = response
        case .answered(let outcome): return outcome
        }
        guard let refreshToken = tokens.refreshToken else {
            return .refused(reason: "token_mismatch", detail: "Apple's answer to the code has no refresh token")
        }
        guard let idToken = tokens.idToken else {
            revokeUnstored(refreshToken, clientID: clientID)
            return .refused(reason: "token_mismatch", detail: "Apple's answer to the code has no id_token")
        }
        let verified: VerifiedIdentityToken
        do {
            verified = try await verifier.verify(idToken, expectedNonce: request.nonce.map(Self.hashedNonce))
        } catch {
            revokeUnstored(refreshToken, clientID: clientID)
            throw error
        }
        guard verified.audience == clientID else {
            revokeUnstored(refreshToken, clientID: clientID)
            return .refused(reason: "wrong_aud", detail: "the aud of Apple's id_token for this code is not client_id")
        }
        var record = Self.record(of: verified, team: team, givenName: request.givenName, familyName: request.familyName,
                                 apiKeyName: apiKeyName)
        record.codeSHA256 = codeHash
        let prepared: SignInStore.Prepared
        do { prepared = try await store.prepare(appleSub: verified.claims.sub, team: team, codeSHA256: codeHash) } catch {
            revokeUnstored(refreshToken, clientID: clientID)
            throw error
        }
        if let earlier = prepared.replay {
            // Apple honoured a code siwa had stored: keep the first answer.
            revokeUnstored(refreshToken, clientID: clientID)
            return try await answer(replaying: earlier, sub: verified.claims.sub, team: team, signedInAt: verified.issuedAt)
        }
        return try await keep(tokens, refreshToken: refreshToken, record: record, prepared: prepared, codeHash: codeHash)
    }
}

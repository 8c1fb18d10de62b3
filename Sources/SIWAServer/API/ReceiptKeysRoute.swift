import AppleSignIn
import Hummingbird

/// `GET /.well-known/siwa-receipts.json`: the public keys that verify
/// siwa's deletion receipts (SIWA_RECEIPT_JWKS_FILE), so that anyone handed
/// a receipt can check it. 404 when none are configured. The body is the
/// key set as siwa re-encodes it, never the file's bytes as they are.
struct ReceiptKeysRoute: Sendable {
    static let path = "/.well-known/siwa-receipts.json"
    /// Keys change only with a restart; an hour keeps a rotation quick to be seen.
    static let cacheControl = "public, max-age=3600"

    let keys: ES256KeySet?

    func register(on router: Router<BasicRequestContext>) {
        let body = keys.map { ByteBuffer(bytes: $0.json()) }
        router.get(RouterPath(stringLiteral: Self.path)) { _, _ -> Response in
            guard let body else {
                return JSONResponse.error(.notFound, reason: "not_found",
                                          detail: "no deletion receipt keys are published here (SIWA_RECEIPT_JWKS_FILE is unset)")
            }
            var headers = HTTPFields()
            headers[.contentType] = "application/json; charset=utf-8"
            headers[.cacheControl] = Self.cacheControl
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
    }
}

import Foundation
import Hummingbird
import Logging
import SIWAClient

/// The example's HTTP application: the routes the iOS app calls
/// (`AccountRoutes`) and the one siwa's worker calls (`AppEventRoutes`).
func buildExampleApplication(settings: ExampleSettings, logger: Logger) throws -> some ApplicationProtocol {
    let siwa = SIWAClient(apiURL: settings.apiURL, apiKey: settings.apiKey)
    let verifier = try AppEventVerifier(secret: settings.webhookSecret)
    let accounts = Accounts()
    let router = Router(context: BasicRequestContext.self)
    router.get("healthz") { _, _ in HTTPResponse.Status.ok }
    AccountRoutes(siwa: siwa, accounts: accounts, logger: logger).register(on: router)
    AppEventRoutes(verifier: verifier, seen: InMemorySeenAppEventIDs(), accounts: accounts, logger: logger).register(on: router)
    return Application(router: router, configuration: .init(address: .hostname(settings.host, port: settings.port)), logger: logger)
}

/// A JSON answer, snake_case as siwa's.
func json(_ status: HTTPResponse.Status, _ value: some Encodable) -> Response {
    let encoder = JSONEncoder()
    encoder.keyEncodingStrategy = .convertToSnakeCase
    encoder.outputFormatting = .sortedKeys
    let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
    return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
}

struct ErrorBody: Encodable {
    let error: String
}

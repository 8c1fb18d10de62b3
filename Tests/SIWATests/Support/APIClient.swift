import AppleSimulator
import Foundation
import HTTPTypes
import OpenAPIRuntime
import SIWAClient

/// The suite's `/v1` calls go through SIWAClient, the client an app's
/// Swift backend uses; only the tests of the wire itself (raw bytes, bad
/// input, header hygiene, listeners) send raw HTTP. One answer, as the tests
/// read it: the value, or siwa's refusal (its status and reason code).
struct ClientAnswer<Value: Sendable>: Sendable {
    let result: Result<Value, SIWARefusal>
    /// The status of a success: 200, or 202 for a scheduled deletion.
    var successStatus = 200

    var value: Value? { try? result.get() }

    var refusal: SIWARefusal? {
        if case .failure(let refusal) = result { return refusal }
        return nil
    }

    var status: Int { refusal?.status ?? successStatus }
    var reason: String? { refusal?.code }
    /// For a test's failure message.
    var text: String { refusal.map(\.description) ?? "\(value.map { "\($0)" } ?? "")" }

    /// Runs a client call; siwa's refusals become the answer, anything else is thrown.
    static func of(successStatus: Int = 200, _ call: () async throws -> Value) async throws -> ClientAnswer {
        do {
            return ClientAnswer(result: .success(try await call()), successStatus: successStatus)
        } catch let refusal as SIWARefusal {
            return ClientAnswer(result: .failure(refusal))
        }
    }
}

extension SIWAClient {
    /// The client the tests use: no retry unless asked (a test that checks
    /// a 503 sees it), deadlines the loaded test machine meets.
    static func forTests(apiURL: String, key: String, retry: SIWAClient.RetryPolicy = .never) throws -> SIWAClient {
        guard let url = URL(string: apiURL) else { throw TestSetupError("bad API URL \(apiURL)") }
        return SIWAClient(apiURL: url, apiKey: key,
                          configuration: .init(retry: retry, attemptTimeout: .seconds(30), deadline: .seconds(60)),
                          middlewares: [ContractRecordingMiddleware()])
    }

    /// `POST /v1/sign-in` with a body the tests build as JSON (what the
    /// simulator hands the app, changed as a test needs), decoded into the
    /// client's request type.
    func signIn(json body: [String: Any]) async throws -> ClientAnswer<SIWAClient.SignedInUser> {
        let request = try JSONDecoder().decode(SIWAClient.SignInRequest.self, from: JSONSerialization.data(withJSONObject: body))
        return try await ClientAnswer.of { try await signIn(request) }
    }
}

extension SIWAClient {
    /// `GET /v1/users/{sub}`, as the tests read it.
    func lookup(_ sub: String, in team: Team? = nil) async throws -> ClientAnswer<UserLookup> {
        try await ClientAnswer.of { try await user(appleSub: sub, in: team) }
    }

    /// `DELETE /v1/users/{sub}`: 202 for a scheduled purge, 200 for a user
    /// purged before, siwa's 404 `not_found` for one it does not know.
    func delete(_ sub: String, in team: Team? = nil) async throws -> ClientAnswer<SIWAClient.Deletion> {
        do {
            guard let deletion = try await deleteUser(appleSub: sub, in: team) else {
                return ClientAnswer(result: .failure(SIWARefusal(status: 404, code: "not_found", detail: "no such user")))
            }
            return ClientAnswer(result: .success(deletion), successStatus: deletion.status == .deletionScheduled ? 202 : 200)
        } catch let refusal as SIWARefusal {
            return ClientAnswer(result: .failure(refusal))
        }
    }
}

/// Each answer siwa gives the tests' client, kept for the contract check
/// (ContractRecorder: validated against docs/openapi.yaml at the end of
/// `make test`), as HTTPAnswer.send keeps the raw requests' answers.
struct ContractRecordingMiddleware: ClientMiddleware {
    func intercept(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
                   next: (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)) async throws -> (HTTPResponse, HTTPBody?) {
        let (response, responseBody) = try await next(request, body, baseURL)
        guard ContractRecorder.isRecording else { return (response, responseBody) }
        var bytes = Data()
        if let responseBody { bytes = try await Data(collecting: responseBody, upTo: 4 * 1024 * 1024) }
        ContractRecorder.answer(method: request.method.rawValue, url: baseURL.absoluteString + (request.path ?? ""),
                                status: response.status.code, contentType: response.headerFields[.contentType], body: bytes)
        return (response, HTTPBody(bytes))
    }
}

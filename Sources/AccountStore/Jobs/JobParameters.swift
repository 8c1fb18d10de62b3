import Foundation

/// A job kind's arguments (`siwa.jobs.args`) as a type of its own, with the
/// kind's name (swift-jobs' `JobParameters`). The queue stores and claims
/// them as bytes and reads none of them; each kind decodes its own
/// (`ClaimedJob.parameters(as:)`). The kinds: AccountLifecycle's `JobKinds`.
public protocol JobParameters: Codable, Sendable {
    /// The `kind` column of this kind's jobs.
    static var kind: String { get }
}

extension ClaimedJob {
    /// The job's args as its kind's parameters. Throws a `DecodingError`
    /// for args that are not a JSON object of that shape.
    public func parameters<Parameters: JobParameters>(as type: Parameters.Type) throws -> Parameters {
        try JSONDecoder().decode(Parameters.self, from: args)
    }
}

extension KeyedDecodingContainer {
    /// A text argument, or nil when it is absent, null or not text: a job
    /// made by hand with a wrong type reads as one without it (its kind
    /// then says what is missing), as `args->>'key'` did.
    func text(_ key: Key) -> String? {
        try? decodeIfPresent(String.self, forKey: key)
    }
}

import Foundation

/// The one JSON configuration of every answer siwa gives, over HTTP and as
/// `--json`: snake_case keys (types may also spell them out), times as
/// `UTCTime` with milliseconds, keys sorted and slashes as they are.
///
/// Sorted because JSONEncoder keeps no declared order (it hashes keys
/// unless told to sort), and an answer must be the same bytes every time.
/// The few answers with a documented order that is not sorted (siwa's
/// error shape `{"error", "detail"}`, `/readyz`, the notification's 200)
/// are written member by member in that order (`inOrder`); the server's
/// hand-written hot answers are checked against these byte for byte.
public enum AnswerJSON {
    /// One line: HTTP answers.
    public static func encode(_ value: some Encodable) throws -> Data {
        try encoder(pretty: false).encode(value)
    }

    /// Indented: what `--json` prints, and the admin audit answers.
    public static func pretty(_ value: some Encodable) throws -> Data {
        try encoder(pretty: true).encode(value)
    }

    /// An object whose members keep the order given, each key and value
    /// encoded as `encode` would.
    public static func inOrder(_ members: KeyValuePairs<String, any Encodable>) throws -> Data {
        var bytes = Data("{".utf8)
        for (index, (key, value)) in members.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(try encode(key))
            bytes.append(UInt8(ascii: ":"))
            bytes.append(try encode(value))
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// A new encoder per call: JSONEncoder is a class with mutable options,
    /// and these answers are not on a path where its setup shows.
    public static func encoder(pretty: Bool) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(UTCTime.text(date))
        }
        return encoder
    }
}

import Foundation
import NIOCore
import NIOPosix
import PostgresNIO

/// Why a connection to PostgreSQL could not be made, in the words an
/// operator acts on: which host and port, and what failed (the name did
/// not resolve, nothing listens there, no answer, the server hung up),
/// instead of the driver's internal error text.
enum ConnectionFailure {
    /// nil when `error` is no failure to reach the server (a TLS refusal,
    /// the server's own message): `describe(connectionError:)` says those.
    static func describe(_ error: any Error, host: String, port: Int, connectTimeout: String) -> String? {
        guard let reason = reason(error, host: host, connectTimeout: connectTimeout) else { return nil }
        return "cannot connect to \(host):\(port): \(reason)"
    }

    private static func reason(_ error: any Error, host: String, connectTimeout: String) -> String? {
        switch error {
        case let error as PSQLError:
            switch error.code {
            case .connectionError:
                return error.underlying.flatMap { reason($0, host: host, connectTimeout: connectTimeout) }
                    ?? "the connection failed (\(String("\(error.underlying.map { "\($0)" } ?? "no reason given")".prefix(120))))"
            case .serverClosedConnection, .uncleanShutdown:
                return "the server closed the connection before it answered (is it PostgreSQL, and does it accept this client? See its log)"
            default:
                return error.underlying.flatMap { reason($0, host: host, connectTimeout: connectTimeout) }
            }
        case let error as NIOConnectionError:
            if error.connectionErrors.isEmpty, error.dnsAError != nil || error.dnsAAAAError != nil {
                return "the host name \(host) does not resolve (DNS): check the URL's host"
            }
            if let first = error.connectionErrors.first {
                return reason(first.error, host: host, connectTimeout: connectTimeout) ?? "the connection failed (\(String("\(first.error)".prefix(120))))"
            }
            return "no address to connect to"
        case let error as ChannelError:
            if case .connectTimeout = error {
                return "no answer within \(connectTimeout) (the host is down, or a firewall drops the packets)"
            }
            return nil
        case let error as IOError:
            return errnoReason(error.errnoCode)
        case let error as SocketAddressError:
            if case .unknown = error { return "the host name \(host) does not resolve (DNS): check the URL's host" }
            return nil
        default:
            return nil
        }
    }

    private static func errnoReason(_ code: Int32) -> String {
        switch code {
        case ECONNREFUSED: "connection refused: nothing listens there (is PostgreSQL running, on this port, and listen_addresses covers this address?)"
        case EHOSTUNREACH, ENETUNREACH: "no route to the host (the network, or the address, is wrong)"
        case ETIMEDOUT: "no answer (the host is down, or a firewall drops the packets)"
        case ECONNRESET: "the connection was reset (a firewall, or not a PostgreSQL server)"
        case EACCES, EPERM: "the connection was not permitted on this machine (a local firewall or sandbox)"
        default: "the connection failed (\(String(cString: strerror(code))))"
        }
    }
}

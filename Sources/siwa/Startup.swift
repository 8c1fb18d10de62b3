import AccountStore
import Foundation
import SIWAServer

/// Start-up failures end the process with one clear line on stderr.
enum Startup {
    /// A warning on stderr that does not stop the command.
    static func warn(_ message: String) {
        FileHandle.standardError.write(Data("siwa: warning: \(message)\n".utf8))
    }

    static func fail(_ message: String, code: Int32 = 2) -> Never {
        FileHandle.standardError.write(Data("siwa: \(message)\n".utf8))
        exit(code)
    }

    /// - Parameter databaseSetting: the setting a `DatabaseConfigurationError` is about.
    static func settings<T>(_ databaseSetting: String = "SIWA_DATABASE_URL", _ make: () throws -> T) -> T {
        do { return try make() } catch let error as SettingError {
            fail("\(error)")
        } catch let error as DatabaseConfigurationError {
            fail("\(databaseSetting): \(error)")
        } catch {
            fail("\(error)")
        }
    }
}

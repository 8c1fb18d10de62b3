import AccountStore
import Foundation
import SIWAServer

/// Start-up failures end the process with one clear line on stderr.
enum Startup {
    static func fail(_ message: String, code: Int32 = 2) -> Never {
        FileHandle.standardError.write(Data("siwa: \(message)\n".utf8))
        exit(code)
    }

    static func settings<T>(_ make: () throws -> T) -> T {
        do { return try make() } catch let error as SettingError {
            fail("\(error)")
        } catch let error as DatabaseConfigurationError {
            fail("SIWA_DATABASE_URL: \(error)")
        } catch {
            fail("\(error)")
        }
    }
}

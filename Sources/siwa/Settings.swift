import ArgumentParser
import SIWAConfiguration

struct Settings: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every SIWA_* setting: who reads it, its default and bounds.",
        discussion: """
            The list comes from siwa's one declaration of each setting. The table of docs/settings.md is its \
            --markdown output, and deploy/siwa.env.example, serve.env.example, worker.env.example and \
            migrate.env.example are its --env-file output, for example:
              siwa settings --env-file serve.env > deploy/serve.env.example
            """
    )

    @Flag(help: "Print the markdown table of docs/settings.md.")
    var markdown = false

    @Option(help: ArgumentHelp("Print a whole deploy env file.", valueName: Setting.EnvFile.allCases.map(\.rawValue).joined(separator: "|")))
    var envFile: String?

    func validate() throws {
        if let envFile, Setting.EnvFile(rawValue: envFile) == nil {
            throw ValidationError("--env-file must be one of \(Setting.EnvFile.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if markdown && envFile != nil { throw ValidationError("--markdown and --env-file print different things: give one") }
    }

    func run() {
        if let file = envFile.flatMap(Setting.EnvFile.init(rawValue:)) {
            print(SettingsDocs.envFile(file), terminator: "")
        } else if markdown {
            print(SettingsDocs.markdownTable())
        } else {
            for reader in Setting.Reader.allCases {
                print("siwa \(reader.rawValue)")
                print(SettingsDocs.help(for: reader).split(separator: "\n", omittingEmptySubsequences: false).dropFirst().joined(separator: "\n"))
                print()
            }
        }
    }
}

import ArgumentParser
import SIWAConfiguration

struct Settings: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every SIWA_* setting: who reads it, its default and bounds.",
        discussion: "The list comes from siwa's one declaration of each setting; README.md's table is its --markdown output."
    )

    @Flag(help: "Print the README's markdown table.")
    var markdown = false

    func run() {
        if markdown {
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

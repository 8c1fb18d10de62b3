import ArgumentParser
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run a local demonstration against the Apple simulator.")
    func run() async throws {}
}

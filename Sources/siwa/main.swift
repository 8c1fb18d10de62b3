import NIOCore
import NIOPosix

// `siwa serve`: Swift concurrency runs on NIO's event loops, so that a
// request's awaits (the database, Apple's token endpoint) resume on the
// thread that did the I/O instead of handing off to a second pool of
// threads. This must happen before the first task starts.
if CommandLine.arguments.dropFirst().first == "serve" {
    _ = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
}
// In an async function, so that the async `main` is the one chosen: the
// synchronous one only prints an async subcommand's help.
func runSIWA() async { await SIWACommand.main(nil) }
await runSIWA()

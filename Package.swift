// swift-tools-version:6.1
import PackageDescription

// One layer per target; a target imports only the layers below it.
//   AppleSignIn        Apple's protocols (JWKS cache, notification and identity-token verification);
//                      also a library product, for a Swift backend that verifies identity tokens itself
//   SIWABuildStamp     the git commit the build was made from (C: a generated header, see below)
//   AccountStore       PostgreSQL, a folder per feature (Postgres/ plumbing, Inbox/, Jobs/, Purge/,
//                      SignIn/, Tokens/, Audit/, APIKeys/, AppEvents/, Users/, Transfer/)
//   AccountLifecycle   the domain, a folder per feature (Notifications/, SignIn/, Tokens/, Purge/,
//                      Receipts/, Audit/, AppEvents/, Transfer/), the job engine (Jobs/, Maintenance/: it knows
//                      no kind) and JobKinds.swift, the one list of kinds
//   SIWAConfiguration  the SIWA_* settings, declared once (SettingsCatalog), the log lines, the version
//   SIWAServer         the Hummingbird application (HTTP only)
//   SIWAWorker         `siwa worker`'s wiring (plan, clients, job worker)
//   siwa               the production executable: argument parsing and wiring only
//   AppleSimulator  a stand-in for Apple in tests, the demo and the benchmark
//   siwa-demo       `make demo` (development only; the production siwa never links AppleSimulator)
//   SIWAClient      a library product for the app's Swift backend: /v1 (its calls generated from
//                   docs/openapi.yaml, committed: `make generate-client`) and app-event verification;
//                   no siwa layer depends on it, and the production siwa does not link it
//   siwa-example-backend  an app's backend on SIWAClient and Hummingbird (docs/client.md); never installed
// The commit `siwa --version` and siwa_build_info report is not in this
// manifest: `make` writes it to Sources/SIWABuildStamp/generated/commit.h
// (scripts/build-stamp.sh, from git's HEAD, `-dirty` with uncommitted
// changes, or SIWA_GIT_COMMIT=... given to make, e.g. for a tarball) before
// every swift build, and rewrites it only when the commit changed. The
// header is private to SIWABuildStamp's one C file, so a new commit
// recompiles that file and relinks; nothing else. The manifest reads no
// environment on purpose: when it passed the commit as a define, each new
// commit changed the manifest, so SwiftPM planned the build afresh, and a
// fresh plan of SwiftPM before 6.4 may pass a package's trait defines in
// another order (swift-package-manager#10525), which recompiles that
// package whole (hummingbird, swift-protobuf). A bare `swift build` keeps whatever header is there
// ("unknown" without one).

let package = Package(
    name: "siwa",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "siwa", targets: ["siwa"]),
        // Verifying Sign in with Apple identity tokens (and Apple's
        // notifications) in-process, for a Swift backend: see README.md.
        .library(name: "AppleSignIn", targets: ["AppleSignIn"]),
        // The app's backend calling siwa's /v1 and receiving its app events: docs/client.md.
        .library(name: "SIWAClient", targets: ["SIWAClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        // Already in the graph through Hummingbird; named for SIWAServer's channel handler.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.34.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Already in the graph through Hummingbird and postgres-nio: spans on
        // the notification path and the job steps (a no-op unless a tracer is bootstrapped).
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // The spans' OTLP exporter, when OTEL_EXPORTER_OTLP_ENDPOINT is set: OTLP/HTTP
        // only (its OTLPGRPC trait, on by default, would build gRPC into siwa).
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        // Already in the graph through Hummingbird; reads siwa's settings.
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
        // The admin listener: Basic and Bearer credentials, and the page's templates.
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        // SIWAClient: the runtime and transport of the code swift-openapi-generator made from docs/openapi.yaml.
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.5.0"),
        // Already in the graph through Hummingbird; SIWAClient's middlewares and headers.
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        .target(
            name: "AppleSignIn",
            dependencies: [
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "AccountStore",
            dependencies: [
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                // A connection that fails is described from NIO's own errors (ConnectionFailure).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .target(
            name: "AccountLifecycle",
            dependencies: [
                "AppleSignIn", "AccountStore",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .target(name: "SIWABuildStamp"),
        .target(
            name: "SIWAConfiguration",
            dependencies: [
                "AppleSignIn", "AccountStore", "AccountLifecycle", "SIWABuildStamp",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "SIWAWorker",
            dependencies: [
                "AccountStore", "AccountLifecycle", "SIWAConfiguration",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        .target(
            name: "SIWAServer",
            dependencies: [
                "AppleSignIn", "AccountStore", "AccountLifecycle", "SIWAConfiguration",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // posix_spawn children (demo, bench, tests); no siwa layer depends on it.
        .target(name: "ChildProcesses"),
        .target(
            name: "AppleSimulator",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // The production binary: no test doubles (AppleSimulator) and no
        // process spawning (ChildProcesses) in it.
        .executableTarget(
            name: "siwa",
            dependencies: [
                "AppleSignIn", "AccountStore", "AccountLifecycle", "SIWAConfiguration", "SIWAServer", "SIWAWorker",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Generated/ is swift-openapi-generator's output (scripts/openapi-generator).
        .target(
            name: "SIWAClient",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                // The transport's timeout is NIO's TimeAmount, made from a Duration.
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // An app's backend on SIWAClient: the way to start (docs/client.md).
        .executableTarget(
            name: "siwa-example-backend",
            dependencies: [
                "SIWAClient",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/ExampleBackend"
        ),
        // `make demo`: runs the siwa binary against the Apple simulator in a
        // database of its own (development only, never installed).
        .executableTarget(
            name: "siwa-demo",
            dependencies: [
                "AccountStore", "AppleSimulator", "ChildProcesses",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // The simulator's team key (SimulatorCommand).
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            path: "Sources/SIWADemo"
        ),
        // `make bench`: load generator and pgbench ceiling, in one run.
        .executableTarget(
            name: "siwa-bench",
            dependencies: [
                "AppleSignIn", "AccountStore", "AppleSimulator", "SIWAConfiguration", "SIWAServer", "SIWAWorker", "ChildProcesses",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                // The bare SwiftNIO route, a floor beside the bare Hummingbird one (StackFloors).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // The sign-in part's team key (P-256).
            ],
            path: "Sources/SIWABench"
        ),
        .testTarget(
            name: "SIWATests",
            dependencies: [
                "AppleSignIn", "AccountStore", "AccountLifecycle", "SIWAConfiguration", "SIWAServer", "SIWAWorker", "AppleSimulator", "ChildProcesses",
                // The suite's own /v1 calls and webhook checks go through the client an app's backend uses.
                "SIWAClient",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                // A middleware of the tests' client: the contract check's recorder (ContractRecorder).
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // Route tests without a socket: app.test(.router) (RouteTests).
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                // A second ES256 verifier for the client secret, independent of siwa's code.
                .product(name: "JWTKit", package: "jwt-kit"),
                // The app's side of the webhook's HMAC, independent of siwa's code.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            resources: [.copy("Fixtures")]
        ),
    ],
    swiftLanguageModes: [.v6]
)

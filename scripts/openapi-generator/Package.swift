// swift-tools-version:6.1
import PackageDescription

// `make generate-client`: swift-openapi-generator, built apart from siwa's
// package (scratch path .build-generator), so that neither siwa's build nor
// CI's pays for the generator: SIWAClient's generated code is committed
// (Sources/SIWAClient/Generated) and regenerated from docs/openapi.yaml here.
let package = Package(
    name: "siwa-openapi-generator",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-generator.git", exact: "1.14.3"),
    ]
)

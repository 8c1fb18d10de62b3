import Metrics
import SIWABuildStamp

/// siwa's version, in one place: `siwa --version`, the `siwa_build_info`
/// gauge, the Debian package (the Makefile reads `version` from this file)
/// and CHANGELOG.md's newest heading (a test checks they agree).
public enum SIWAVersion {
    /// Semantic versioning: a release that needs more than `siwa migrate` and
    /// a restart to upgrade, or changes a setting's meaning, bumps the minor
    /// version while siwa is 0.x.
    public static let version = "0.17.0"

    /// The git commit the binary was built from, or "unknown" (see Package.swift).
    public static let commit = String(cString: siwa_build_commit())

    /// What `siwa --version` prints: `0.10.0 (commit 0bd7a50e1f2a)`.
    public static var description: String { "\(version) (commit \(commit))" }

    /// `siwa_build_info{version="0.10.0",commit="..."} 1`, the Prometheus
    /// convention for a build's identity (join on it in queries and alerts).
    /// Called once for each process's registry (`SIWAMetrics.makeRegistry`):
    /// serve's /metrics and the worker's.
    public static func recordBuildInfo(metrics: any MetricsFactory) {
        Gauge(label: "siwa_build_info", dimensions: [("version", version), ("commit", commit)], factory: metrics).record(1)
    }
}

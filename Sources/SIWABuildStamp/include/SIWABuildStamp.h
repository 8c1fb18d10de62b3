#ifndef SIWA_BUILD_STAMP_H
#define SIWA_BUILD_STAMP_H

/// The git commit this siwa was built from ("unknown" when the build was not
/// told: see Package.swift). Read it through SIWAVersion.commit.
const char *siwa_build_commit(void);

#endif

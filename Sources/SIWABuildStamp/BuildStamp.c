#include "SIWABuildStamp.h"

// The commit is in generated/commit.h, which `make` (scripts/build-stamp.sh)
// rewrites before each swift build only when the commit changed. It is a
// header beside this file, not in include/: Swift imports include/ only, so a
// new commit recompiles this one file and relinks, and no module that
// imports SIWABuildStamp is invalidated. Without it (a bare `swift build` in
// a fresh checkout, a tarball built without make) the commit is "unknown".
#if __has_include("generated/commit.h")
#include "generated/commit.h"
#endif
#ifndef SIWA_GIT_COMMIT
#define SIWA_GIT_COMMIT "unknown"
#endif

const char *siwa_build_commit(void) {
    return SIWA_GIT_COMMIT;
}

#include "SIWABuildStamp.h"

// SIWA_GIT_COMMIT is defined by Package.swift from the environment variable
// of that name at build time (the Makefile sets it from git). A C define,
// because Swift has no compile-time constants with values; only this file is
// recompiled when it changes.
#ifndef SIWA_GIT_COMMIT
#define SIWA_GIT_COMMIT "unknown"
#endif

const char *siwa_build_commit(void) {
    return SIWA_GIT_COMMIT;
}

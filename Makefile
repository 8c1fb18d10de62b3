# siwa: build, test, demo and benchmark entry points.
# PostgreSQL clusters are throwaway ones from scripts/testdb.sh
# (in $${SIWA_PG_ROOT:-/tmp/siwa-pg}; installed with apt-get when run as root).
#
#   make build | test | demo | try | bench | clean-db
#   make test SWIFT_TEST_FLAGS='--filter NotificationEndpointTests'

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

# Swift lives in /opt/swift on our machines; use it when swift is not on PATH.
ifeq ($(shell command -v swift 2>/dev/null),)
  ifneq ($(wildcard /opt/swift/usr/bin/swift),)
    export PATH := /opt/swift/usr/bin:$(PATH)
  endif
endif

TESTDB := $(CURDIR)/scripts/testdb.sh
SWIFT_TEST_FLAGS ?=

.PHONY: build test demo try bench clean-db check-swift check-openssl check-chromium check-alerts

check-swift:
	@command -v swift >/dev/null 2>&1 || { \
	  echo "error: swift is not on PATH (and /opt/swift/usr/bin/swift does not exist)." >&2; \
	  echo "Install a Swift 6 toolchain from https://www.swift.org/install/ and add its usr/bin to PATH." >&2; \
	  exit 1; }

build: check-swift
	swift build

# The client-secret tests check siwa's ES256 signatures with openssl, an
# independent verifier; installed with apt-get (as root) when missing.
check-openssl:
	@command -v openssl >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "openssl not found; installing it with apt-get" >&2; \
	    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssl >&2; \
	  else \
	    echo "error: openssl is not installed (the tests verify siwa's client secret with it): apt-get install openssl" >&2; exit 1; \
	  fi; }

# The admin page's test loads it in a real browser: Debian's chromium,
# headless; installed with apt-get (as root) when missing. If it cannot be
# installed, that one test is skipped and says why; the rest still run.
check-chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "chromium not found; installing it with apt-get (the admin page's browser test)" >&2; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } >&2 \
	      || echo "warning: chromium could not be installed: the admin page's browser test will be skipped" >&2; \
	  else \
	    echo "warning: chromium is not installed (apt-get install chromium): the admin page's browser test will be skipped" >&2; \
	  fi; }

# The Prometheus alert rules (deploy/prometheus/alerts.yml): checked and run
# against their test series with promtool, from Debian's prometheus package
# (installed with apt-get, as root, when missing; if it cannot be, a warning
# and the check is skipped).
check-alerts:
	@command -v promtool >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "promtool not found; installing Debian's prometheus package with apt-get (the alert rules' tests)" >&2; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; } >&2 \
	      || echo "warning: prometheus could not be installed: the alert rules are not checked" >&2; \
	  else \
	    echo "warning: promtool is not installed (apt-get install prometheus): the alert rules are not checked" >&2; \
	  fi; }
	@if command -v promtool >/dev/null 2>&1; then \
	  promtool check rules deploy/prometheus/alerts.yml && \
	  promtool test rules deploy/prometheus/alerts.test.yml; \
	fi

# At most this many tests run at once. The suite starts real siwa
# processes, PostgreSQL databases and a browser; on a 2-core machine an
# unbounded run (every test at once) turns deadlines into flakes.
TEST_PARALLELISM ?= 8

# swift build first: some tests run the siwa executable itself.
# Each run marks the processes its tests start (SIWA_TEST_RUN_MARKER);
# whatever is still running afterwards, e.g. after a crash, is stopped.
test: check-swift check-openssl check-chromium check-alerts
	swift build
	test_url="$$($(TESTDB) start test)"; \
	fault_url="$$($(TESTDB) start fault)"; \
	marker="run-$$$$-$$(date +%s)"; \
	status=0; \
	SIWA_TEST_RUN_MARKER="$$marker" \
	SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="$(TEST_PARALLELISM)" \
	SIWA_TEST_DATABASE_URL="$$test_url" \
	SIWA_TEST_FAULT_DATABASE_URL="$$fault_url" \
	SIWA_TEST_PG_SCRIPT="$(TESTDB)" \
	swift test $(SWIFT_TEST_FLAGS) || status=$$?; \
	scripts/reap-children.sh "$$marker"; \
	exit $$status

# siwa-demo (development only) makes, uses and drops a database of its own
# on the demo cluster: migrate as the owner `siwa`, serve and worker as the
# runtime role `siwa_app`.
demo: check-swift
	swift build
	url="$$($(TESTDB) start demo)"; SIWA_DEMO_DATABASE_URL="$$url" scripts/demo.sh

# siwa with sign-in on, its worker and the Apple simulator, left running
# for curl (the commands are printed); Ctrl-C ends it.
try: check-swift
	swift build
	url="$$($(TESTDB) start demo)"; SIWA_DEMO_DATABASE_URL="$$url" scripts/demo.sh --serve

bench: check-swift
	swift build -c release
	url="$$($(TESTDB) start bench)"; SIWA_BENCH_SERVER_URL="$$url" scripts/bench.sh

clean-db:
	for name in $$($(TESTDB) list); do $(TESTDB) destroy "$$name"; done

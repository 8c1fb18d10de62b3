# siwa: build, test, demo and benchmark entry points.
# PostgreSQL clusters are throwaway ones from scripts/testdb.sh
# (in $${SIWA_PG_ROOT:-/tmp/siwa-pg}; installed with apt-get when run as root).
#
#   make build | test | demo | try | bench | clean-db | generate-client
#   make test SWIFT_TEST_FLAGS='--filter NotificationEndpointTests'
#   make install PREFIX=/usr/local DESTDIR=/tmp/stage | deb | test-package

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

# The version has one home, Sources/SIWAConfiguration/SIWAVersion.swift; the
# package and its file name read it from there.
VERSION := $(shell sed -n 's/^ *public static let version = "\(.*\)"$$/\1/p' Sources/SIWAConfiguration/SIWAVersion.swift)
# The commit every swift build here stamps into siwa: this tree's HEAD,
# `-dirty` with uncommitted changes; empty (so "unknown") outside a git
# checkout of siwa, e.g. a release tarball, where the packager may set it:
# make deb SIWA_GIT_COMMIT=0bd7a50e1f2a. build-stamp writes it into a header
# of SIWABuildStamp (see Package.swift), rewritten only when it changes; it
# is not handed to swift in the environment.
ifeq ($(origin SIWA_GIT_COMMIT),undefined)
  SIWA_GIT_COMMIT := $(shell [ "$$(git rev-parse --show-toplevel 2>/dev/null)" = "$(CURDIR)" ] && \
    c=$$(git rev-parse --short=12 HEAD) && { git diff --quiet HEAD -- 2>/dev/null || c=$$c-dirty; } && echo $$c)
endif
unexport SIWA_GIT_COMMIT

.PHONY: build build-stamp generate-client test demo try bench clean-db check-swift check-openssl check-wrk check-chromium check-alerts check-openapi fuzz-api \
        build-static install deb test-package check-packaging-tools check-lintian \
        image image-simulator image-binaries check-container-tools test-containers

check-swift:
	@command -v swift >/dev/null 2>&1 || { \
	  echo "error: swift is not on PATH (and /opt/swift/usr/bin/swift does not exist)." >&2; \
	  echo "Install a Swift 6 toolchain from https://www.swift.org/install/ and add its usr/bin to PATH." >&2; \
	  exit 1; }

# Before every swift build: the commit, into SIWABuildStamp's header.
build-stamp:
	@scripts/build-stamp.sh '$(subst ','\'',$(SIWA_GIT_COMMIT))'

build: check-swift build-stamp
	swift build

# SIWAClient's calls and types from docs/openapi.yaml, with
# swift-openapi-generator built apart (.build-generator): run it after
# changing the document and commit Sources/SIWAClient/Generated with it. The
# code is committed rather than made by the generator's build plugin, which
# would build the generator in every fresh clone (CI's included).
generate-client: check-swift
	scripts/openapi-generator/generate.sh

# A command the tests need, installed with apt-get (as root) when missing,
# else an error that says what to install:
# $(call apt-tool,COMMAND,PACKAGE,what the tests do with it).
define apt-tool
	@command -v $(1) >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "$(1) not found; installing it with apt-get ($(3))" >&2; \
	    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(2) >&2; \
	  else \
	    echo "error: $(1) is not installed ($(3)): apt-get install $(2)" >&2; exit 1; \
	  fi; }
endef

# The client-secret tests check siwa's ES256 signatures with openssl, an
# independent verifier.
check-openssl:
	$(call apt-tool,openssl,openssl,the tests verify siwa's client secret with it)

# BenchSmokeTests runs every part of `make bench` at a tiny size, which
# drives siwa with wrk.
check-wrk:
	$(call apt-tool,wrk,wrk,the benchmark's smoke test drives siwa with it)

# The admin page's test loads it in a real browser: Debian's chromium,
# headless; installed with apt-get (as root) when missing. If it cannot be
# installed, that one test is skipped and says why; the rest still run.
check-chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "chromium not found; installing it with apt-get (the admin page's browser test)" >&2; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } >&2 \
	      || echo "warning: chromium could not be installed: the admin page's browser test will be skipped (it fails under CI)" >&2; \
	  else \
	    echo "warning: chromium is not installed (apt-get install chromium): the admin page's browser test will be skipped (it fails under CI)" >&2; \
	  fi; }

# The Prometheus alert rules (deploy/prometheus/alerts.yml): checked and run
# against their test series with promtool, from Debian's prometheus package
# (installed with apt-get, as root, when missing). If it cannot be: on a
# developer's machine a warning and the check is skipped; under CI (CI set,
# and not 0 or false, as .ci/run has it) an error, as the admin page's
# browser test fails there without chromium: rules nobody checked must not
# pass as green.
check-alerts:
	@command -v promtool >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "promtool not found; installing Debian's prometheus package with apt-get (the alert rules' tests)" >&2; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; } >&2 \
	      || echo "warning: prometheus could not be installed" >&2; \
	  fi; }
	@if command -v promtool >/dev/null 2>&1; then \
	  promtool check rules deploy/prometheus/alerts.yml && \
	  promtool test rules deploy/prometheus/alerts.test.yml; \
	else \
	  case "$${CI:-}" in \
	    ""|0|false) echo "warning: promtool is not installed (apt-get install prometheus): the alert rules are not checked" >&2 ;; \
	    *) echo "error: promtool is not installed (apt-get install prometheus), and under CI the alert rules must be checked" >&2; exit 1 ;; \
	  esac; \
	fi

# docs/openapi.yaml is read and every answer the suite receives checked
# against it by scripts/openapi-check.py, with Debian's python3-yaml and
# python3-jsonschema (installed with apt-get, as root, when missing). If
# they cannot be: on a developer's machine a warning and the contract is not
# checked; under CI an error, as for the alert rules.
check-openapi:
	@scripts/openapi-check.sh routes docs/openapi.yaml >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "no python3 with yaml and jsonschema; installing Debian's python3-yaml and python3-jsonschema (docs/openapi.yaml's checks)" >&2; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3 python3-yaml python3-jsonschema; } >&2 \
	      || echo "warning: python3-yaml and python3-jsonschema could not be installed" >&2; \
	  fi; }
	@scripts/openapi-check.sh routes docs/openapi.yaml >/dev/null || { \
	  case "$${CI:-}" in \
	    ""|0|false) echo "warning: docs/openapi.yaml is not checked (apt-get install python3-yaml python3-jsonschema)" >&2 ;; \
	    *) echo "error: under CI docs/openapi.yaml must be checked: apt-get install python3-yaml python3-jsonschema" >&2; exit 1 ;; \
	  esac; }

# Every answer of siwa's listeners the suite receives over HTTP, and every
# app event the tests' receiver is sent, is written here during `make test`
# (SIWA_TEST_OPENAPI_RECORD, Sources/AppleSimulator/ContractRecorder.swift) and
# checked against docs/openapi.yaml once the tests are done. A run of the
# whole suite (no SWIFT_TEST_FLAGS) must also have exercised every documented
# success answer and every app event: one no test gives is one nothing checks.
OPENAPI_RECORD := $(CURDIR)/.build/test-artifacts/openapi-records.jsonl

# At most this many tests run at once. The suite starts real siwa
# processes, PostgreSQL databases and a browser; on a 2-core machine an
# unbounded run (every test at once) turns deadlines into flakes.
TEST_PARALLELISM ?= 8

# swift build first: some tests run the siwa executable itself.
# Each run marks the processes its tests start (SIWA_TEST_RUN_MARKER);
# whatever is still running afterwards, e.g. after a crash, is stopped.
test: check-swift check-openssl check-wrk check-chromium check-alerts check-openapi build-stamp
	swift build
	test_url="$$($(TESTDB) start test)"; \
	fault_url="$$($(TESTDB) start fault)"; \
	marker="run-$$$$-$$(date +%s)"; \
	status=0; \
	mkdir -p "$$(dirname '$(OPENAPI_RECORD)')"; : > '$(OPENAPI_RECORD)'; \
	SIWA_TEST_OPENAPI_RECORD='$(OPENAPI_RECORD)' \
	SIWA_TEST_RUN_MARKER="$$marker" \
	SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="$(TEST_PARALLELISM)" \
	SIWA_TEST_DATABASE_URL="$$test_url" \
	SIWA_TEST_FAULT_DATABASE_URL="$$fault_url" \
	SIWA_TEST_PG_SCRIPT="$(TESTDB)" \
	swift test $(SWIFT_TEST_FLAGS) || status=$$?; \
	scripts/reap-children.sh "$$marker"; \
	check=0; scripts/openapi-check.sh validate $(if $(SWIFT_TEST_FLAGS),,--coverage) docs/openapi.yaml '$(OPENAPI_RECORD)' || check=$$?; \
	case "$$check:$${CI:-}" in \
	  0:*) ;; \
	  127:|127:0|127:false) echo "warning: the answers were not checked against docs/openapi.yaml" >&2 ;; \
	  *) echo "error: answers or app events break docs/openapi.yaml (above; the records: $(OPENAPI_RECORD))" >&2; \
	     [ "$$status" != 0 ] || status=1 ;; \
	esac; \
	exit $$status

# schemathesis against a running siwa (scripts/fuzz-api.sh): every
# operation of docs/openapi.yaml on its listener, with an app and an admin
# key; no 5xx, no answer that breaks the document, no row written by junk.
fuzz-api: check-swift build-stamp
	swift build
	scripts/fuzz-api.sh

# siwa-demo (development only) makes, uses and drops a database of its own
# on the demo cluster: migrate as the owner `siwa`, serve as `siwa_serve`,
# the worker as `siwa_worker` (its plan's SQL as `siwa_purge`).
demo: check-swift build-stamp
	swift build
	url="$$($(TESTDB) start demo)"; SIWA_DEMO_DATABASE_URL="$$url" scripts/demo.sh

# siwa with sign-in on, its worker and the Apple simulator, left running
# for curl (the commands are printed); Ctrl-C ends it.
try: check-swift build-stamp
	swift build
	url="$$($(TESTDB) start demo)"; SIWA_DEMO_DATABASE_URL="$$url" scripts/demo.sh --serve

bench: check-swift build-stamp
	swift build -c release
	url="$$($(TESTDB) start bench)"; SIWA_BENCH_SERVER_URL="$$url" scripts/bench.sh

clean-db:
	for name in $$($(TESTDB) list); do $(TESTDB) destroy "$$name"; done

# ------------------------------------------------------------- packaging --
# `make install` lays out an installed siwa under PREFIX (DESTDIR for
# staging): the binary, the migrations beside it in share/siwa/sql (where an
# installed siwa looks: Migrator.defaultDirectory), the example settings, the
# systemd units with ExecStart= pointing at PREFIX, the sysusers.d entry
# for the service users, the documentation (share/doc/siwa, laid out as in
# this tree so that its links hold, with the compose file and the Kubernetes
# manifests), and the man pages and shell completions generated
# from the command definitions (scripts/generate-manual.sh). Settings go to SYSCONFDIR/siwa, mode 0600, only
# where no file is there yet: an operator's settings are never overwritten.
# The binary is built with the Swift standard library and Foundation linked
# in (--static-swift-stdlib), so the server needs no Swift installed.
PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
# The static build has a build folder of its own: with --static-swift-stdlib
# the modules are compiled differently, and flipping one folder between the
# two (make test, make bench, then this) leaves objects that no longer link.
STATIC_BUILD := .build-static
# The binary installed: the release build with the static standard library,
# built here, unless SIWA_BINARY names one (CI's package test: see test-package).
SIWA_BINARY ?=

build-static: check-swift build-stamp
	swift build -c release --static-swift-stdlib --product siwa --scratch-path $(STATIC_BUILD)

install: $(if $(SIWA_BINARY),,build-static)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/siwa/sql $(DESTDIR)$(PREFIX)/share/siwa/examples \
	  $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(SYSCONFDIR)/siwa
	install -m 0755 $(or $(SIWA_BINARY),$(STATIC_BUILD)/release/siwa) $(DESTDIR)$(PREFIX)/bin/siwa
	scripts/generate-manual.sh $(or $(SIWA_BINARY),$(STATIC_BUILD)/release/siwa) .build/manual
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
	  $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	install -m 0644 .build/manual/man1/*.1.gz $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 .build/manual/completions/siwa.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/siwa
	install -m 0644 .build/manual/completions/_siwa $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions/_siwa
	install -m 0644 .build/manual/completions/siwa.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/siwa.fish
	install -m 0644 sql/*.sql $(DESTDIR)$(PREFIX)/share/siwa/sql/
	install -m 0644 deploy/*.env.example deploy/purge-plan.example.json deploy/purge-plan.supabase.example.json \
	  $(DESTDIR)$(PREFIX)/share/siwa/examples/
	install -d $(DESTDIR)$(PREFIX)/share/doc/siwa/docs $(DESTDIR)$(PREFIX)/share/doc/siwa/deploy/prometheus \
	  $(DESTDIR)$(PREFIX)/share/doc/siwa/sql
	install -m 0644 README.md CHANGELOG.md LICENSE $(DESTDIR)$(PREFIX)/share/doc/siwa/
	install -m 0644 docs/*.md docs/openapi.yaml docs/openapi-3.0.yaml $(DESTDIR)$(PREFIX)/share/doc/siwa/docs/
	install -m 0644 deploy/README.md deploy/compose.yaml deploy/purge-plan.supabase.example.json $(DESTDIR)$(PREFIX)/share/doc/siwa/deploy/
	install -d $(DESTDIR)$(PREFIX)/share/doc/siwa/deploy/compose $(DESTDIR)$(PREFIX)/share/doc/siwa/deploy/kubernetes
	install -m 0644 deploy/compose/roles.sql $(DESTDIR)$(PREFIX)/share/doc/siwa/deploy/compose/
	install -m 0644 deploy/kubernetes/*.yaml $(DESTDIR)$(PREFIX)/share/doc/siwa/deploy/kubernetes/
	install -m 0644 deploy/prometheus/alerts.yml $(DESTDIR)$(PREFIX)/share/doc/siwa/deploy/prometheus/
	install -m 0644 sql/README.md $(DESTDIR)$(PREFIX)/share/doc/siwa/sql/
	for unit in deploy/*.service; do \
	  sed 's|/usr/local/bin/siwa|$(PREFIX)/bin/siwa|g' "$$unit" > $(DESTDIR)$(UNITDIR)/$$(basename "$$unit"); \
	  chmod 0644 $(DESTDIR)$(UNITDIR)/$$(basename "$$unit"); \
	done
	install -m 0644 deploy/siwa.sysusers.conf $(DESTDIR)$(SYSUSERSDIR)/siwa.conf
	for name in siwa serve worker migrate; do \
	  target=$(DESTDIR)$(SYSCONFDIR)/siwa/$$name.env; \
	  [ -e "$$target" ] || install -m 0600 deploy/$$name.env.example "$$target"; \
	done

# dpkg-deb builds the package; dpkg-shlibdeps computes its Depends from the
# libraries the binary links (glibc, libstdc++, libgcc: the Swift runtime is
# inside it). Both are Debian's dpkg-dev, installed with apt-get when missing.
check-packaging-tools:
	@command -v dpkg-shlibdeps >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "dpkg-shlibdeps not found; installing dpkg-dev with apt-get" >&2; \
	    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q dpkg-dev >&2; \
	  else \
	    echo "error: dpkg-shlibdeps is missing (apt-get install dpkg-dev)" >&2; exit 1; \
	  fi; }

DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_DIR ?= .build/deb
# 1: package a binary that links the toolchain's Swift runtime (CI's test only).
DEB_ALLOW_SWIFT_RUNTIME ?=
DEB_FILE := $(DEB_DIR)/siwa_$(VERSION)_$(DEB_ARCH).deb

deb: check-packaging-tools
	rm -rf $(DEB_DIR)/root
	$(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/$(DEB_DIR)/root PREFIX=/usr SYSCONFDIR=/etc
	DEB_ALLOW_SWIFT_RUNTIME=$(DEB_ALLOW_SWIFT_RUNTIME) scripts/make-deb.sh $(DEB_DIR)/root "$(VERSION)" "$(DEB_ARCH)" $(DEB_FILE)

# CI's check of the package: build it, install it into a throwaway root, run
# the installed siwa (--version, migrate against a test database) and
# systemd-analyze verify on the installed units. It packages the debug build
# that make test has just made (linked to the toolchain's Swift runtime, which
# CI has), not a release build with the static standard library: that would
# compile every dependency a second time, in release (see docs/operations.md,
# "Installing"). Everything else in the package is what `make deb` makes.
# lintian, Debian's package checker (installed with apt-get, as root, when
# missing), must find no error and no warning; its overrides (deploy/debian/lintian-overrides)
# each say why.
check-lintian:
	@command -v lintian >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "lintian not found; installing it with apt-get" >&2; \
	    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends lintian >&2; \
	  else \
	    echo "error: lintian is missing (apt-get install lintian)" >&2; exit 1; \
	  fi; }

# ------------------------------------------------------------ containers --
# The image (Dockerfile) with whichever engine is installed: podman, else
# docker (podman with --format docker, which keeps the HEALTHCHECK). BINARIES=build compiles siwa inside the build (the official
# Swift image); BINARIES=prebuilt packs this host's build-static
# binaries (stripped into .build/image/), so nothing is compiled twice.
# IMAGE_BUILD_ARGS passes more, e.g. --build-arg BASE=... (the tests use a
# Debian base made here: scripts/test-containers.sh).
CONTAINER_ENGINE ?= $(shell command -v podman >/dev/null 2>&1 && echo podman || echo docker)
IMAGE ?= localhost/siwa:$(VERSION)
SIMULATOR_IMAGE ?= localhost/siwa-simulator:$(VERSION)
BINARIES ?= build
IMAGE_BUILD_ARGS ?=
IMAGE_BUILD = $(CONTAINER_ENGINE) build $(if $(filter podman,$(notdir $(CONTAINER_ENGINE))),--format docker) --build-arg BINARIES=$(BINARIES) \
  --build-arg SIWA_GIT_COMMIT='$(subst ','\'',$(SIWA_GIT_COMMIT))' $(IMAGE_BUILD_ARGS)

image: $(if $(filter prebuilt,$(BINARIES)),image-binaries)
	$(IMAGE_BUILD) --target runtime -t $(IMAGE) .

# Development only: the Apple simulator that deploy/compose.yaml runs.
image-simulator: $(if $(filter prebuilt,$(BINARIES)),image-binaries)
	$(IMAGE_BUILD) --target simulator -t $(SIMULATOR_IMAGE) .

image-binaries: build-static
	swift build -c release --static-swift-stdlib --product siwa-demo --scratch-path $(STATIC_BUILD)
	install -d .build/image
	strip --strip-debug -o .build/image/siwa $(STATIC_BUILD)/release/siwa
	strip --strip-debug -o .build/image/siwa-demo $(STATIC_BUILD)/release/siwa-demo

check-container-tools:
	$(call apt-tool,podman,podman runc,the container tests run siwa's image with it)
	$(call apt-tool,runc,runc,podman runs the test containers with it)
	$(call apt-tool,podman-compose,podman-compose,the container tests run deploy/compose.yaml with it)
	$(call apt-tool,debootstrap,debootstrap,the container tests make a Debian base image with it)

# The image, deploy/compose.yaml and deploy/kubernetes/ run for real under
# podman against the test cluster (scripts/test-containers.sh).
test-containers: check-swift build-stamp check-container-tools image-binaries
	url="$$($(TESTDB) start test)"; \
	IMAGE='$(IMAGE)' SIMULATOR_IMAGE='$(SIMULATOR_IMAGE)' scripts/test-containers.sh "$$url"

test-package: check-swift build-stamp check-lintian
	swift build
	$(MAKE) --no-print-directory deb SIWA_BINARY=.build/debug/siwa DEB_ALLOW_SWIFT_RUNTIME=1 DEB_DIR=.build/deb-test
	url="$$($(TESTDB) start test)"; \
	scripts/test-package.sh .build/deb-test/siwa_$(VERSION)_$(DEB_ARCH).deb "$$url"

# ---------------------------------------------------- the Python example --
# examples/python (docs/client.md, "Python"): its unit tests (the client
# generated from docs/openapi.yaml, committed and checked to be current;
# both documents valid OpenAPI; the events' check) and its end-to-end test
# against siwa-demo --serve with the app events sent to it
# (scripts/test-python-example.sh; the packages come from PyPI into
# .build/python-example-venv).
.PHONY: test-python-example
test-python-example: check-swift build-stamp
	swift build
	scripts/test-python-example.sh

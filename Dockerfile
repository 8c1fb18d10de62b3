# siwa's container image: `siwa serve` by default, `siwa worker` and the
# one-shot commands (`siwa migrate`, `siwa api-keys create`, ...) by command.
# docs/containers.md says how to run it; deploy/compose.yaml and
# deploy/kubernetes/ use it.
#
#   docker build -t siwa .                        # compiles siwa (the build stage)
#   make image                                    # the same with podman or docker
#   make image BINARIES=prebuilt                  # packs make build-static's binary instead
#   docker build --target simulator -t siwa-simulator .   # development only: the Apple simulator
#
# Build arguments: SWIFT_IMAGE (the builder, a Swift 6 toolchain on Debian 12),
# BASE (the runtime's Debian 12), BINARIES (`build`: compile here;
# `prebuilt`: take .build/image/ from the context) and
# SIWA_GIT_COMMIT (stamped into `siwa --version`).
ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG BASE=debian:bookworm-slim
ARG BINARIES=build

# ---- build: the release binaries, the Swift runtime linked in, so the
# runtime image needs no Swift.
FROM ${SWIFT_IMAGE} AS build
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
# The manifest names the test target, whose folder must exist.
COPY Tests ./Tests
COPY scripts/build-stamp.sh ./scripts/
ARG SIWA_GIT_COMMIT=
RUN --mount=type=cache,target=/src/.build \
    scripts/build-stamp.sh "$SIWA_GIT_COMMIT" \
 && swift build -c release --static-swift-stdlib --product siwa \
 && install -D -m 0755 .build/release/siwa /out/siwa \
 && strip --strip-debug /out/siwa

# The simulator's binary, only when that target is built (the same cache:
# only siwa-demo's own modules are compiled).
FROM build AS build-simulator
RUN --mount=type=cache,target=/src/.build \
    swift build -c release --static-swift-stdlib --product siwa-demo \
 && install -D -m 0755 .build/release/siwa-demo /out/siwa-demo \
 && strip --strip-debug /out/siwa-demo

# ---- prebuilt: `make build-static`'s binaries, stripped of debug
# information into .build/image/ by `make image BINARIES=prebuilt`, for
# a host that has built siwa already (CI: one compile, not two).
FROM scratch AS prebuilt
COPY .build/image/siwa /out/
FROM scratch AS prebuilt-simulator
COPY .build/image/siwa-demo /out/

FROM ${BINARIES} AS binaries
FROM ${BINARIES}-simulator AS simulator-binaries

# ---- the runtime's base: CA certificates (TLS to Apple, to PostgreSQL with
# verify-full, to webhook targets), time zones, and siwa's user.
FROM ${BASE} AS runtime-base
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 siwa \
 && useradd --uid 10001 --gid 10001 --home-dir /var/lib/siwa --no-create-home --shell /usr/sbin/nologin siwa \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/siwa /var/lib/siwa/erasures /var/lib/siwa/keys
COPY deploy/container/healthcheck.sh /usr/local/lib/siwa/healthcheck
# Inside a container every listener siwa opens binds all of the container's
# addresses: its network namespace is the boundary, and the engine or
# Kubernetes decides what reaches which port. The admin listener stays on
# loopback (`kubectl port-forward` and `docker exec` reach it there): an
# admin key is the only thing guarding it. Outside a container loopback
# stays every listener's default.
ENV SIWA_HTTP_HOST=0.0.0.0 \
    SIWA_API_HTTP_HOST=0.0.0.0 \
    SIWA_METRICS_HTTP_HOST=0.0.0.0 \
    SIWA_WORKER_METRICS_HOST=0.0.0.0
USER 10001:10001
WORKDIR /var/lib/siwa

# ---- simulator (development only, never the production image): the Apple
# simulator that deploy/compose.yaml runs in Apple's place.
FROM runtime-base AS simulator
COPY --from=simulator-binaries /out/siwa-demo /usr/local/bin/siwa-demo
EXPOSE 8090
ENTRYPOINT ["/usr/local/bin/siwa-demo", "simulator", "--listen", "0.0.0.0:8090"]
CMD ["--keys-dir", "/var/lib/siwa/keys"]

# ---- runtime: the production image (the last stage, so the default target).
FROM runtime-base AS runtime
COPY --from=binaries /out/siwa /usr/local/bin/siwa
# Where an installed siwa looks for its migrations: share/siwa/sql beside bin/.
COPY sql/*.sql /usr/local/share/siwa/sql/
COPY deploy/purge-plan.example.json /usr/local/share/siwa/examples/
# The worker's erasure ledger (SIWA_ERASURE_LEDGER_DIR): back it up apart
# from the database (docs/operations.md, "Restoring a backup").
VOLUME /var/lib/siwa
# public (Apple's notifications), API (/v1), serve's metrics, the worker's metrics
EXPOSE 8080 8082 8083 9091
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 CMD ["/usr/local/lib/siwa/healthcheck"]
ENTRYPOINT ["/usr/local/bin/siwa"]
CMD ["serve"]

# syntax=docker/dockerfile:1
#
# robotsguard container image where images can be pulled: built with the Rust image, run on
# Debian slim as an unprivileged user with only the binary and config/. Without a registry (and in
# CI), scripts/build-image.sh builds the same image from the host's Debian packages instead.
#
#   docker build --build-arg ROBOTSGUARD_COMMIT=$(git rev-parse --short=12 HEAD) \
#     --build-arg ROBOTSGUARD_DESCRIBE=$(git describe --tags --match 'v[0-9]*' --abbrev=12) -t robotsguard .
#   docker run --rm -p 8080:8080 -v "$PWD/my.yaml:/etc/robotsguard/robotsguard.yaml:ro" robotsguard
#
# Your config must listen on 0.0.0.0 (not the loopback default) to be reachable from outside
# the container. The Helm chart in helm/robotsguard runs this image.

# Cargo.lock needs rustc 1.95 (parking_lot 0.13). Both stages are Debian 13 (trixie), so the
# binary runs against the glibc it was linked with.
ARG RUST_IMAGE=rust:1.95.0-slim-trixie
ARG RUNTIME_IMAGE=debian:trixie-slim

FROM ${RUST_IMAGE} AS build
# pingora builds zlib-ng with cmake; the slim image has gcc but neither cmake nor make.
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The build context has no .git: build.rs takes the commit for --version from here.
ARG ROBOTSGUARD_COMMIT=unknown
ENV ROBOTSGUARD_COMMIT=${ROBOTSGUARD_COMMIT}
# And the release tag (`git describe --tags --match 'v[0-9]*'`); empty: --version names none.
ARG ROBOTSGUARD_DESCRIBE=
ENV ROBOTSGUARD_DESCRIBE=${ROBOTSGUARD_DESCRIBE}
# Cache mounts keep the registry and compiled dependencies between builds; the binary is copied
# out because the target cache is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin robotsguard \
    && install -m 0755 target/release/robotsguard /usr/local/bin/robotsguard

FROM ${RUNTIME_IMAGE}
ARG ROBOTSGUARD_COMMIT=unknown
LABEL org.opencontainers.image.title="robotsguard" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${ROBOTSGUARD_COMMIT}"
# Root certificates for upstream TLS (rustls reads the system store).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/robotsguard /usr/local/bin/robotsguard
COPY config/ /etc/robotsguard/
# The same numeric user the Helm chart runs as; numeric so runAsNonRoot can verify it.
USER 65532:65532
EXPOSE 8080 9090
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/robotsguard", "healthcheck", "--address", "127.0.0.1:9090"]
ENTRYPOINT ["/usr/local/bin/robotsguard"]
CMD ["serve", "--config", "/etc/robotsguard/robotsguard.yaml"]

# syntax=docker/dockerfile:1
#
# robotsguard container image: built with the Rust image, run on Debian slim as an unprivileged
# user with only the binary and config/.
#
#   docker build -t robotsguard .
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
# Cache mounts keep the registry and compiled dependencies between builds; the binary is copied
# out because the target cache is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    CARGO_PROFILE_RELEASE_STRIP=debuginfo \
    cargo build --release --locked --bin robotsguard \
    && install -m 0755 target/release/robotsguard /usr/local/bin/robotsguard

FROM ${RUNTIME_IMAGE}
# Root certificates for upstream TLS (rustls reads the system store).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/robotsguard /usr/local/bin/robotsguard
COPY config/ /etc/robotsguard/
# The same numeric user the Helm chart runs as; numeric so runAsNonRoot can verify it.
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/robotsguard"]
CMD ["serve", "--config", "/etc/robotsguard/robotsguard.yaml"]

#!/usr/bin/env bash
# Runs the test suite as on a fresh machine: in a minimal Debian (debootstrap, imported with
# `docker import`, no registry) that has only what the README asks for beside the Rust toolchain
# (python3, a C compiler) — no nginx, redis-server, tinyproxy, curl or openssl — as an
# unprivileged user with an empty home. The tests must then fetch what they run beside
# robotsguard themselves (tests/it/support/programs.rs) and pass, none skipped.
#
# The test binaries are built here (`cargo test --no-run`) and run there from a read-only mount of
# the work tree at the same path: the container needs no toolchain, and what it proves is what the
# tests do on a machine without those programs.
#
#   scripts/test-fresh-machine.sh [TEST FILTER...]    # DEBIAN_MIRROR=http://... for another mirror
set -euo pipefail
cd "$(dirname "$0")/.."

image=robotsguard-fresh:bookworm
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=python3,gcc,libc6-dev
key=$(printf '%s %s' "$suite" "$packages" | sha256sum | cut -c1-16)

if ! docker info >/dev/null 2>&1; then
    echo "test-fresh-machine: no Docker engine answers (docker info failed)" >&2
    exit 1
fi
if [ "$(docker image inspect -f '{{index .Config.Labels "robotsguard.fresh"}}' "$image" 2>/dev/null || true)" != "$key" ]; then
    if ! command -v debootstrap >/dev/null 2>&1; then
        echo "test-fresh-machine: debootstrap is needed to build $image (apt-get install debootstrap)" >&2
        exit 1
    fi
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    if ! debootstrap --variant=minbase --include="$packages" "$suite" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
        tail -n 30 "$work/debootstrap.log" >&2
        echo "test-fresh-machine: debootstrap failed (log above)" >&2
        exit 1
    fi
    for program in nginx redis-server tinyproxy curl openssl; do
        if chroot "$work/rootfs" sh -c "command -v $program" >/dev/null 2>&1; then
            echo "test-fresh-machine: the fresh image has $program; it must not" >&2
            exit 1
        fi
    done
    # An unprivileged user, as a developer would be; the package lists stay empty.
    chroot "$work/rootfs" useradd --create-home --uid 1000 tester
    rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
    tar --numeric-owner -C "$work/rootfs" -cf "$work/rootfs.tar" .
    docker import \
        --change "LABEL robotsguard.fresh=$key" \
        --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
        --message "robotsguard fresh machine: debootstrap $suite with $packages" \
        "$work/rootfs.tar" "$image" >/dev/null
    echo "test-fresh-machine: $image built"
fi

# The test binaries cargo would run, built here, each with its package's directory (where cargo
# runs it).
tests=$(cargo test --workspace --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        print(os.path.dirname(m["manifest_path"]), m["executable"])')
if [ -z "$tests" ]; then
    echo "test-fresh-machine: cargo test --no-run built no test binary" >&2
    exit 1
fi
work_tree=$(pwd)
failed=0
while read -r package binary; do
    echo "test-fresh-machine: $(basename "$binary") (in $package)"
    # The work tree is read-only: tests write only to temporary directories and to the cache in
    # the user's home.
    if ! docker run --rm --user 1000:1000 --env HOME=/home/tester \
        --env CARGO_MANIFEST_DIR="$package" --workdir "$package" \
        --volume "$work_tree:$work_tree:ro" "$image" \
        "$binary" --test-threads=2 "$@" </dev/null; then
        failed=1
    fi
done <<<"$tests"
exit $failed

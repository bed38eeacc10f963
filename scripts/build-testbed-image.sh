#!/usr/bin/env bash
# Builds robotsguard-testbed:bookworm, the image the compose fleet (deploy/compose/) runs its
# Redis primary, replica and sentinels, its stock nginx origins, its load generator and its
# Prometheus from: a minimal Debian system made by debootstrap from Debian's packages and
# imported with `docker import` (no registry). Built once per package list: an image whose
# robotsguard.testbed label matches is kept.
#
#   scripts/build-testbed-image.sh            # DEBIAN_MIRROR=http://... to use another mirror
set -euo pipefail
cd "$(dirname "$0")/.."

image=robotsguard-testbed:bookworm
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=redis-server,redis-sentinel,redis-tools,nginx,python3,curl,ca-certificates,prometheus,procps
key=$(printf '%s %s' "$suite" "$packages" | sha256sum | cut -c1-16)

if ! docker info >/dev/null 2>&1; then
    echo "build-testbed-image: no Docker engine answers (docker info failed)" >&2
    exit 1
fi
if [ "$(docker image inspect -f '{{index .Config.Labels "robotsguard.testbed"}}' "$image" 2>/dev/null || true)" = "$key" ]; then
    echo "build-testbed-image: $image is up to date"
    exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
started=$(date +%s)
if ! debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -n 30 "$work/debootstrap.log" >&2
    echo "build-testbed-image: debootstrap failed (log above)" >&2
    exit 1
fi
# Package caches and lists are not needed at run time.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc "$root"/usr/share/man
tar --numeric-owner -C "$root" -cf "$work/rootfs.tar" .
docker import \
    --change "LABEL robotsguard.testbed=$key" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --message "robotsguard testbed: debootstrap $suite with $packages" \
    "$work/rootfs.tar" "$image" >/dev/null
echo "build-testbed-image: $image built in $(($(date +%s) - started)) s ($packages)"

#!/usr/bin/env bash
# Builds the container image of a past release, robotsguard-release:vVERSION, for the fleet
# test's rolling upgrade (scripts/test-fleet.py, "upgrade"): by default the newest release in
# RELEASES before the checked-out commit.
#
#   scripts/build-release-image.sh [vVERSION]
#
# The release's source comes from its commit (RELEASES names it: tags do not reach every clone),
# unpacked under target/releases/; its binary is built with the dev profile into this checkout's
# target/ (CARGO_TARGET_DIR), so the dependencies this checkout built are reused and only the
# workspace's crates compile; the image is made by that release's own scripts/build-image.sh.
# A debug build is enough for a test of the store's keys and the rollout, and costs minutes where
# a release build costs tens of them. An image already built from the same commit is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

wanted=${1:-}
head=$(git rev-parse HEAD)
tag=""
commit=""
while read -r t c _; do
    case "$t" in ''|'#'*) continue ;; esac
    if [ -n "$wanted" ]; then
        [ "$t" = "$wanted" ] && { tag=$t; commit=$c; }
    elif [ "$c" != "$head" ]; then
        tag=$t
        commit=$c
    fi
done <RELEASES
if [ -z "$tag" ]; then
    echo "build-release-image: RELEASES names no release ${wanted:-before this commit}" >&2
    exit 1
fi
# A shallow clone lacks the release's commit: its history is fetched once.
if ! git cat-file -e "$commit^{commit}" 2>/dev/null \
    && [ "$(git rev-parse --is-shallow-repository)" = true ]; then
    git fetch --quiet --unshallow || true
fi
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "build-release-image: $tag: commit $commit is not in this clone (a shallow clone? git fetch --unshallow)" >&2
    exit 1
fi
image="robotsguard-release:$tag"
short=${commit:0:12}
if [ "$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.revision"}}' "$image" 2>/dev/null || true)" = "$short" ]; then
    echo "build-release-image: $image (commit $short) is up to date"
    exit 0
fi

started=$(date +%s)
work="$root/target/releases/$tag"
rm -rf "$work/src"
mkdir -p "$work/src"
git archive "$commit" | tar -x -C "$work/src"
# Cargo puts the binary at target/debug/robotsguard, where this checkout's own is: kept aside.
kept=""
restore() {
    if [ -n "$kept" ]; then mv -f "$kept" "$root/target/debug/robotsguard"; fi
    kept=""
}
trap restore EXIT
# A binary built before from the same commit is used as it is.
if [ -x "$work/robotsguard" ] && "$work/robotsguard" --version 2>/dev/null | grep -q "(commit $short)"; then
    echo "build-release-image: reusing $work/robotsguard"
else
    if [ -e target/debug/robotsguard ]; then
        kept=$(mktemp "$root/target/robotsguard.XXXXXX")
        cp -p target/debug/robotsguard "$kept"
    fi
    # This checkout's .cargo/config.toml too: the build scripts then see the same environment
    # (its cmake shim, jemalloc's make flags) and the dependencies already built are fresh.
    (cd "$work/src" && ROBOTSGUARD_COMMIT=$short CARGO_TARGET_DIR="$root/target" \
        cargo build --locked --config "$root/.cargo/config.toml" --bin robotsguard)
    cp target/debug/robotsguard "$work/robotsguard"
    restore
    # Debug info is not needed in a test image, and would take it past the image size limit.
    strip "$work/robotsguard"
fi

# That release's image script tags robotsguard:latest too, which stays this checkout's image.
latest=$(docker image inspect -f '{{.Id}}' robotsguard:latest 2>/dev/null || true)
(cd "$work/src" && scripts/build-image.sh --binary "$work/robotsguard" --tag "$image")
if [ -n "$latest" ]; then
    docker tag "$latest" robotsguard:latest
else
    docker rmi robotsguard:latest >/dev/null
fi
echo "build-release-image: $image (commit $short, debug build) in $(($(date +%s) - started)) s"

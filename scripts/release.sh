#!/usr/bin/env bash
# Builds a tagged release's artifacts into target/release-artifacts/, from a checkout of the tag
# (git worktree add /tmp/rg-v0.3.0 v0.3.0 && cd /tmp/rg-v0.3.0):
#
#   scripts/release.sh v0.3.0                    (or 0.3.0)
#   scripts/release.sh v0.3.0 --pgo     # the binary (and the image's) built profile-guided by
#                                      # scripts/pgo-build.sh: faster; two builds and a minute of
#                                      # loopback load on a pinned CPU (apt-get as root when a tool
#                                      # is missing); not byte for byte reproducible
#
#   robotsguard-VERSION-x86_64-linux-gnu          the release binary (--version names the commit
#                                                 and the tag)
#   robotsguard-VERSION-image.tar.gz              the container image (docker load -i ...)
#   robotsguard-VERSION.cdx.json                  CycloneDX SBOM of the binary's crates
#   SHA256SUMS                                    sha256sum -c SHA256SUMS checks the three
#
# Refuses a version that Cargo.toml does not carry or CHANGELOG.md has no dated section for, and a
# checkout that is not exactly the annotated tag vVERSION (uncommitted changes included);
# --untagged (CI, on every commit) builds the same artifacts from whatever is checked out.
# Reuses the release build when it is current: CI builds it once, here, for the binary and the
# image. With --pgo the binary is built again, guided, in target/pgo.
# The SBOM tool, cargo-cyclonedx, is built from crates.io once per machine (a pinned version).
set -euo pipefail
cd "$(dirname "$0")/.."

untagged=0
if [ "${1:-}" = --untagged ]; then
    untagged=1
    shift
fi
version=${1:-}
version=${version#v}
pgo=0
case "${2:-}" in
    "") ;;
    --pgo) pgo=1 ;;
    *) echo "usage: $0 [--untagged] VERSION [--pgo]" >&2; exit 2 ;;
esac
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
    echo "usage: $0 VERSION [--pgo]   (e.g. 0.2.0)" >&2
    exit 2
fi
package_version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
if [ "$package_version" != "$version" ]; then
    echo "release: Cargo.toml says $package_version, not $version: bump it first" >&2
    exit 1
fi
if ! grep -Eq "^## \[$(sed 's/\./\\./g' <<<"$version")\] - [0-9]{4}-[0-9]{2}-[0-9]{2}\$" CHANGELOG.md; then
    echo "release: CHANGELOG.md has no '## [$version] - YYYY-MM-DD' section: write what changed first" >&2
    exit 1
fi

tag="v$version"
if [ "$untagged" = 0 ]; then
    if [ "$(git cat-file -t "$tag" 2>/dev/null)" != tag ]; then
        echo "release: there is no annotated tag $tag (git tag -a $tag -m 'robotsguard $version')" >&2
        exit 1
    fi
    if [ "$(git rev-parse "$tag^{commit}")" != "$(git rev-parse HEAD)" ]; then
        echo "release: HEAD is not $tag: check the tag out first" >&2
        exit 1
    fi
    if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
        echo "release: the checkout has uncommitted changes" >&2
        exit 1
    fi
fi

out=target/release-artifacts
rm -rf "$out"
mkdir -p "$out"
target_dir=${CARGO_TARGET_DIR:-target}

if [ "$pgo" = 1 ]; then
    scripts/pgo-build.sh
    binary="$target_dir/pgo/bin/robotsguard"   # its default --out
else
    cargo build --release --locked --bin robotsguard
    binary="$target_dir/release/robotsguard"
fi
line=$("$binary" --version)
expected="robotsguard $version (commit *) $tag"
[ "$untagged" = 1 ] && expected="robotsguard $version (commit *)*"
# shellcheck disable=SC2254
case "$line" in
    $expected) ;;
    *) echo "release: the binary says '$line'" >&2; exit 1 ;;
esac
cp "$binary" "$out/robotsguard-$version-x86_64-linux-gnu"

scripts/build-image.sh --binary "$binary" --tag "robotsguard:$version" --save "$out/robotsguard-$version-image.tar.gz"

# Built once per machine and user (a few CPU minutes), outside the clone, as scripts/cmake keeps
# its cmake: CI's fresh clones reuse it.
cyclonedx_version=0.5.9
tools="${ROBOTSGUARD_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/robotsguard}/cargo-cyclonedx-$cyclonedx_version"
cyclonedx="$tools/bin/cargo-cyclonedx"
if [ ! -x "$cyclonedx" ]; then
    cargo install --quiet --locked cargo-cyclonedx --version "$cyclonedx_version" --root "$tools"
fi
# The binary's own dependency graph (no dev-dependencies), for the target it is built for.
"$cyclonedx" cyclonedx --format json --spec-version 1.5 --target x86_64-unknown-linux-gnu \
    --override-filename "robotsguard-$version.cdx" >/dev/null
mv "robotsguard-$version.cdx.json" "$out/"
# The tool writes one per workspace member; the binary's (above) covers the engine crate's crates.
rm -f crates/*/"robotsguard-$version.cdx.json"

(cd "$out" && sha256sum robotsguard-* >SHA256SUMS && sha256sum -c --quiet SHA256SUMS)
echo "release: $line"
(cd "$out" && ls -l --time-style=+ | tail -n +2 | awk '{print "release:   " $NF "  " $5 " bytes"}')

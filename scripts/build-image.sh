#!/usr/bin/env bash
# Builds the robotsguard container image without a registry: nothing is pulled.
#
#   scripts/build-image.sh                     # cargo build --release, then the image
#   scripts/build-image.sh --binary FILE       # an already built release binary
#   scripts/build-image.sh --tag NAME --save FILE.tar.gz
#
# 1. A base image imported from this Debian host's own packages: exactly the shared libraries the
#    binary loads (ldd), the CA certificates, the dpkg status of those packages and os-release (so
#    an image scanner sees which Debian packages and versions are inside), /etc/passwd with the
#    chart's user 65532, an empty /tmp. No shell, no package manager. `docker import` makes it.
# 2. The image: that base, the binary and config/ (deploy/image/Dockerfile), with OCI labels
#    (version and commit read from the binary's --version, source from ROBOTSGUARD_SOURCE or the
#    git remote when that is a web address, scripts/source-url.sh; none for a local clone),
#    STOPSIGNAL and a HEALTHCHECK (`robotsguard healthcheck`).
# Prints the image's size compressed (docker save | gzip) and fails above 60 MiB.
# The binary links against this host's glibc: build it on the Debian release the base comes from.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=""
binary=""
save=""
max_compressed=$((60 * 1024 * 1024))
while [ $# -gt 0 ]; do
    case "$1" in
        --binary) binary=$2; shift 2 ;;
        --tag) tag=$2; shift 2 ;;
        --save) save=$2; shift 2 ;;
        *) echo "usage: $0 [--binary FILE] [--tag NAME] [--save FILE.tar.gz]" >&2; exit 2 ;;
    esac
done

if ! docker info >/dev/null 2>&1; then
    echo "build-image: no Docker engine answers (docker info failed); it is needed to build the image" >&2
    exit 1
fi
for tool in ldd dpkg-query tar gzip; do
    command -v "$tool" >/dev/null || { echo "build-image: $tool is missing" >&2; exit 1; }
done
if [ ! -s /etc/ssl/certs/ca-certificates.crt ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ca-certificates >/dev/null
fi

if [ -z "$binary" ]; then
    cargo build --release --locked --bin robotsguard
    binary="${CARGO_TARGET_DIR:-target}/release/robotsguard"
fi
[ -x "$binary" ] || { echo "build-image: $binary is not an executable" >&2; exit 1; }

# "robotsguard 0.2.0 (commit 0123456789ab)"
version_line=$("$binary" --version)
version=$(sed -n 's/^robotsguard \([^ ]*\) .*/\1/p' <<<"$version_line")
commit=$(sed -n 's/.*(commit \([^)]*\)).*/\1/p' <<<"$version_line")
[ -n "$version" ] && [ -n "$commit" ] || { echo "build-image: cannot read the version from '$version_line'" >&2; exit 1; }
source_url=$(scripts/source-url.sh)
# The source label only where there is a web address to give (not a build machine's path).
source_label=()
if [ -n "$source_url" ]; then
    source_label=(--label "org.opencontainers.image.source=$source_url")
fi
tag=${tag:-robotsguard:$version}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root"/{etc/ssl/certs,tmp,usr/local/bin,var/lib/dpkg,usr/share/doc}
chmod 1777 "$root/tmp"

# The libraries as the dynamic loader finds them on this host, copied to the same paths (the
# loader's own path is fixed in the binary), and the packages that installed them.
packages=(ca-certificates base-files)
while read -r path; do
    [ -n "$path" ] || continue
    mkdir -p "$root$(dirname "$path")"
    cp -L "$path" "$root$path"
    real=$(readlink -f "$path")
    owner=$(dpkg-query -S "$real" 2>/dev/null || dpkg-query -S "$path" 2>/dev/null || true)
    [ -n "$owner" ] || { echo "build-image: no Debian package owns $path" >&2; exit 1; }
    packages+=("${owner%%:*}")
done < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)
for package in "${packages[@]}"; do
    dpkg-query -s "$package" >>"$root/var/lib/dpkg/status"
    echo >>"$root/var/lib/dpkg/status"
    if [ -f "/usr/share/doc/$package/copyright" ]; then
        mkdir -p "$root/usr/share/doc/$package"
        cp "/usr/share/doc/$package/copyright" "$root/usr/share/doc/$package/"
    fi
done
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
cp -L /etc/os-release "$root/etc/os-release"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nrobotsguard:x:65532:65532:robotsguard:/nonexistent:/usr/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nrobotsguard:x:65532:\n' >"$root/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"

base="robotsguard-base:$version"
base_packages=$(for p in "${packages[@]}"; do printf '%s=%s ' "$p" "$(dpkg-query -W -f='${Version}' "$p")"; done)
# Fixed owners and times, so that the same host packages give the same layer.
tar --sort=name --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$root" -cf "$work/rootfs.tar" .
docker import \
    --change "LABEL org.opencontainers.image.description=\"robotsguard runtime base: $base_packages\"" \
    --change 'ENV PATH=/usr/local/bin' \
    --message "robotsguard runtime base from this host's Debian packages" \
    "$work/rootfs.tar" "$base" >/dev/null
echo "build-image: base $base ($base_packages)"

context="$work/context"
mkdir -p "$context"
cp "$binary" "$context/robotsguard"
cp -r config "$context/config"
cp deploy/image/Dockerfile "$context/Dockerfile"
# The classic builder: it uses a local FROM image as it is, and never asks a registry for it.
DOCKER_BUILDKIT=0 docker build --quiet \
    --build-arg "BASE=$base" \
    --build-arg "VERSION=$version" \
    --build-arg "COMMIT=$commit" \
    "${source_label[@]}" \
    --build-arg "CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    -t "$tag" "$context" >/dev/null 2>"$work/build.log" || { cat "$work/build.log" >&2; exit 1; }

# The tag the compose fleet (deploy/compose/) runs by default.
docker tag "$tag" robotsguard:latest

if [ -n "$save" ]; then
    docker save "$tag" | gzip -6 >"$save"
    compressed=$(stat -c %s "$save")
else
    compressed=$(docker save "$tag" | gzip -6 | wc -c)
fi
uncompressed=$(docker image inspect -f '{{.Size}}' "$tag")
awk -v tag="$tag" -v version="$version" -v commit="$commit" -v size="$uncompressed" -v packed="$compressed" 'BEGIN {
    printf "build-image: %s (version %s, commit %s): %.1f MiB, %.1f MiB compressed (docker save | gzip)\n",
        tag, version, commit, size / 1048576, packed / 1048576 }'
if [ "$compressed" -gt "$max_compressed" ]; then
    echo "build-image: the image is over 60 MiB compressed" >&2
    exit 1
fi

#!/usr/bin/env bash
# Builds robotsguard profile-guided: an instrumented build serves the benchmarks' traffic, and the
# counts it records tell the compiler which branches are taken and which code is hot, so the final
# build lays the request path out in fewer cache lines and predicts its branches better
# (docs/BENCHMARKS.md, issue 34, step 39).
#
#   scripts/pgo-build.sh                        # release build: target/pgo/bin/robotsguard
#   scripts/pgo-build.sh --profiling --with-passthrough --out /tmp/pgo
#                                               # the benchmarks' build, the pass-through too:
#                                               # BINARIES=/tmp/pgo bench/proxy-compare.sh
#
# 1. Builds robotsguard and the pass-through (examples/passthrough.rs) instrumented
#    (-Cprofile-generate), in a target directory of their own: target/pgo/generate.
# 2. Trains them: bench/proxy-compare.sh (plain HTTP/1.1: browsers, allowed and blocked crawlers)
#    and bench/proxy-tls-h2.sh (HTTP/1.1 and HTTP/2 over TLS), one round each, all on loopback.
#    Both run the pass-through beside robotsguard; its counts of the pingora code they share are
#    merged with robotsguard's (the same request path, the same shape).
# 3. Merges the counts with llvm-profdata of the compiler's own LLVM version (Debian's llvm-N
#    package, installed when missing) and builds again with them (-Cprofile-use):
#    target/pgo/use, the binaries copied to --out (default target/pgo/bin).
#
# The profile is made fresh from this checkout every time: a profile of other sources would
# match only the functions that did not change. Needs what the two benchmarks need (wrk, h2load,
# nginx, openssl; installed from Debian packages when missing). Two release builds: about twice
# the time of `cargo build --release`.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
with_passthrough=0
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --profiling) profile=profiling; shift ;;
        --with-passthrough) with_passthrough=1; shift ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--profiling] [--with-passthrough] [--out DIR]" >&2; exit 2 ;;
    esac
done

target_dir=${CARGO_TARGET_DIR:-target}
out=${out:-$target_dir/pgo/bin}
host=$(rustc -vV | sed -n 's/^host: //p')
llvm_major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[ -n "$host" ] && [ -n "$llvm_major" ] || { echo "pgo-build: cannot read the host or LLVM version from rustc -vV" >&2; exit 1; }

# The raw counts' format follows LLVM's version: only the compiler's own major version reads them.
profdata=""
for candidate in "llvm-profdata-$llvm_major" llvm-profdata; do
    if command -v "$candidate" >/dev/null 2>&1 &&
        "$candidate" --version 2>/dev/null | grep -Eq "LLVM version $llvm_major\."; then
        profdata=$candidate
        break
    fi
done
if [ -z "$profdata" ]; then
    if command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "llvm-$llvm_major" >/dev/null ||
            { echo "pgo-build: no llvm-$llvm_major package here; llvm-profdata $llvm_major is needed (rustc's LLVM)" >&2; exit 1; }
        profdata=llvm-profdata-$llvm_major
    else
        echo "pgo-build: llvm-profdata $llvm_major (the LLVM version of rustc) is needed" >&2
        exit 1
    fi
fi

# `--target` keeps the flags off build scripts and procedural macros, which run on the host.
targets=(--bin robotsguard --example passthrough)
built() { # target-dir name: where cargo put a binary or example
    if [ "$2" = robotsguard ]; then echo "$1/$host/$profile/robotsguard"; else echo "$1/$host/$profile/examples/$2"; fi
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$target_dir/pgo"
pgo=$(cd "$target_dir/pgo" && pwd)
# Fixed paths (the flags are part of cargo's fingerprint): a second run rebuilds only what changed.
raw="$pgo/raw"
rm -rf "$raw"
generate="$pgo/generate"
echo "pgo-build: 1/3 instrumented build ($generate)"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$raw" CARGO_TARGET_DIR="$generate" \
    cargo build --locked --profile "$profile" --target "$host" "${targets[@]}"
mkdir -p "$work/instrumented"
cp "$(built "$generate" robotsguard)" "$(built "$generate" passthrough)" "$work/instrumented/"

echo "pgo-build: 2/3 training on the benchmarks' traffic"
BINARIES="$work/instrumented" ROUNDS=1 DURATION=5 bench/proxy-compare.sh >"$work/train-plain.log" 2>&1 ||
    { cat "$work/train-plain.log" >&2; echo "pgo-build: training (bench/proxy-compare.sh) failed" >&2; exit 1; }
BINARIES="$work/instrumented" ROUNDS=1 DURATION=5 bench/proxy-tls-h2.sh >"$work/train-tls.log" 2>&1 ||
    { cat "$work/train-tls.log" >&2; echo "pgo-build: training (bench/proxy-tls-h2.sh) failed" >&2; exit 1; }
shopt -s nullglob
counts=("$raw"/*.profraw)
shopt -u nullglob
# One file per binary: robotsguard's and the pass-through's (each exits on SIGTERM and writes it).
if [ "${#counts[@]}" -lt 2 ]; then
    echo "pgo-build: the instrumented binaries wrote ${#counts[@]} profiles, expected 2" >&2
    exit 1
fi
merged="$pgo/merged.profdata"
"$profdata" merge -o "$merged" "${counts[@]}"

use="$pgo/use"
echo "pgo-build: 3/3 build with the profile ($use)"
if [ "$with_passthrough" = 0 ]; then targets=(--bin robotsguard); fi
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$merged" CARGO_TARGET_DIR="$use" \
    cargo build --locked --profile "$profile" --target "$host" "${targets[@]}"
mkdir -p "$out"
cp "$(built "$use" robotsguard)" "$out/"
if [ "$with_passthrough" = 1 ]; then cp "$(built "$use" passthrough)" "$out/"; fi
echo "pgo-build: $("$out/robotsguard" --version), profile-guided: $out/robotsguard"

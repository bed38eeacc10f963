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
#    and bench/proxy-tls-h2.sh (HTTP/1.1 and HTTP/2 over TLS), one round each, all on loopback
#    (both benchmarks run the pass-through beside robotsguard). Each binary writes its own counts.
# 3. Merges the counts with llvm-profdata of the compiler's own LLVM version (rustup's llvm-tools,
#    or Debian's llvm-N package, installed when missing): robotsguard's alone, or with
#    --with-passthrough both binaries' (they are built in one cargo run, so the code they share
#    is compiled once, from the counts of both). Then builds again with them (-Cprofile-use):
#    target/pgo/use, the binaries copied to --out (default target/pgo/bin; a relative --out is
#    taken from the current directory).
#
# The guided build is made from a profile of this checkout, every time, and is rebuilt whole
# (the profile's name, and so the compiler flags, change with its contents): counts from other
# sources would guide only the functions that did not change. The instrumented build is reused
# when nothing changed. target/pgo takes a few GB (`rm -rf target/pgo` frees it). Needs what the
# two benchmarks need (wrk, h2load, nginx, openssl; installed from Debian packages when missing).
# Two release builds and a minute of training: about twice the time of `cargo build --release`.
# The counts depend on the machine's timing, so two guided builds of one commit may differ.
set -euo pipefail
caller_dir=$PWD
cd "$(dirname "$0")/.."

profile=release
with_passthrough=0
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --profiling) profile=profiling; shift ;;
        --with-passthrough) with_passthrough=1; shift ;;
        --out) [ $# -ge 2 ] || { echo "pgo-build: --out needs a directory" >&2; exit 2; }; out=$2; shift 2 ;;
        *) echo "usage: $0 [--profiling] [--with-passthrough] [--out DIR]" >&2; exit 2 ;;
    esac
done

target_dir=${CARGO_TARGET_DIR:-target}
mkdir -p "$target_dir/pgo"
pgo=$(cd "$target_dir/pgo" && pwd)
case "$out" in
    "") out=$pgo/bin ;;
    /*) ;;
    *) out=$caller_dir/$out ;;
esac
host=$(rustc -vV | sed -n 's/^host: //p')
llvm_major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[ -n "$host" ] && [ -n "$llvm_major" ] || { echo "pgo-build: cannot read the host or LLVM version from rustc -vV" >&2; exit 1; }

# The raw counts' format follows LLVM's version: only the compiler's own major version reads them.
profdata=""
for candidate in "$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata" "llvm-profdata-$llvm_major" llvm-profdata; do
    if command -v "$candidate" >/dev/null 2>&1 &&
        "$candidate" --version 2>/dev/null | grep -Eq "LLVM version $llvm_major\."; then
        profdata=$candidate
        break
    fi
done
if [ -z "$profdata" ] && command -v apt-get >/dev/null 2>&1; then
    if { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "llvm-$llvm_major" >/dev/null; }; then
        profdata=llvm-profdata-$llvm_major
    fi
fi
if [ -z "$profdata" ]; then
    echo "pgo-build: llvm-profdata of LLVM $llvm_major (rustc's) is needed: rustup component add llvm-tools, or the llvm-$llvm_major package (apt-get install, as root)" >&2
    exit 1
fi

# `--target` keeps the flags off build scripts and procedural macros, which run on the host.
targets=(--bin robotsguard --example passthrough)
built() { # target-dir name: where cargo put a binary or example
    if [ "$2" = robotsguard ]; then echo "$1/$host/$profile/robotsguard"; else echo "$1/$host/$profile/examples/$2"; fi
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A fixed path (the flags are part of cargo's fingerprint): a second run rebuilds only what changed.
raw="$pgo/raw"
rm -rf "$raw"
mkdir -p "$raw"
generate="$pgo/generate"
echo "pgo-build: 1/3 instrumented build ($generate)"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$raw" CARGO_TARGET_DIR="$generate" \
    cargo build --locked --profile "$profile" --target "$host" "${targets[@]}"
# The benchmarks start DIR/robotsguard and DIR/passthrough: each starts its instrumented binary
# with its own counts file (exec keeps the process id, whose CPU time the benchmarks read).
mkdir -p "$work/instrumented"
for name in robotsguard passthrough; do
    cp "$(built "$generate" "$name")" "$work/instrumented/$name.instrumented"
    printf '#!/bin/sh\nLLVM_PROFILE_FILE=%q; export LLVM_PROFILE_FILE\nexec %q "$@"\n' \
        "$raw/$name-%m.profraw" "$work/instrumented/$name.instrumented" >"$work/instrumented/$name"
    chmod +x "$work/instrumented/$name"
done

echo "pgo-build: 2/3 training on the benchmarks' traffic"
BINARIES="$work/instrumented" ROUNDS=1 DURATION=5 bench/proxy-compare.sh >"$work/train-plain.log" 2>&1 ||
    { cat "$work/train-plain.log" >&2; echo "pgo-build: training (bench/proxy-compare.sh) failed" >&2; exit 1; }
BINARIES="$work/instrumented" ROUNDS=1 DURATION=5 bench/proxy-tls-h2.sh >"$work/train-tls.log" 2>&1 ||
    { cat "$work/train-tls.log" >&2; echo "pgo-build: training (bench/proxy-tls-h2.sh) failed" >&2; exit 1; }
shopt -s nullglob
robotsguard_counts=("$raw"/robotsguard-*.profraw)
passthrough_counts=("$raw"/passthrough-*.profraw)
shopt -u nullglob
# Each binary writes its file when it exits (on the benchmarks' SIGTERM).
if [ "${#robotsguard_counts[@]}" = 0 ] || [ "${#passthrough_counts[@]}" = 0 ]; then
    echo "pgo-build: the instrumented binaries wrote no counts to $raw" >&2
    exit 1
fi
counts=("${robotsguard_counts[@]}")
if [ "$with_passthrough" = 1 ]; then counts+=("${passthrough_counts[@]}"); fi
merged="$work/merged.profdata"
"$profdata" merge -o "$merged" "${counts[@]}"
# Named by its contents, so that the flags change with the profile and cargo rebuilds every crate
# with it (cargo does not see a file a dependency's compiler flags name).
profile_file="$pgo/merged-$(sha256sum "$merged" | cut -c1-16).profdata"
rm -f "$pgo"/merged-*.profdata
mv "$merged" "$profile_file"

use="$pgo/use"
echo "pgo-build: 3/3 build with the profile ($use)"
# The same targets as the instrumented build, even when only robotsguard is wanted: building the
# example brings in the dev-dependencies, whose features change how shared crates compile, and a
# function compiled differently no longer matches its counts.
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$profile_file" CARGO_TARGET_DIR="$use" \
    cargo build --locked --profile "$profile" --target "$host" "${targets[@]}"
mkdir -p "$out"
cp "$(built "$use" robotsguard)" "$out/"
if [ "$with_passthrough" = 1 ]; then cp "$(built "$use" passthrough)" "$out/"; fi
echo "pgo-build: $("$out/robotsguard" --version), profile-guided: $out/robotsguard"

#!/usr/bin/env bash
# Runs each cargo-fuzz target for a bounded time, one at a time, and prints executions, exec/s,
# corpus size and findings per target (the figures recorded in docs/BENCHMARKS.md, "Fuzzing").
#
#   scripts/fuzz.sh                          # every target, 300 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh         # every target, 600 s each
#   scripts/fuzz.sh path_canonicalize=120 config_load=900   # chosen targets and times
#   FUZZ_RUNS=10000000 scripts/fuzz.sh config_load=3600      # stop at 10 M executions (or the time)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). cargo-fuzz drives rustc with nightly-only flags;
# on the stable toolchain RUSTC_BOOTSTRAP=1 unlocks them (set below; it changes no code generation
# of the main crate, which is never built by this script's cargo invocations outside fuzz/).
#
# Build: release with debug assertions and overflow checks (-O -a), no sanitizer (-s none): the
# code under test is safe Rust, so AddressSanitizer would only halve throughput. One process per
# target (no -jobs/-fork), so the run fits a shared 2-core machine.
#
# Inputs: fuzz/seeds/<target> (committed, read-only here) plus fuzz/corpus/<target> (git-ignored,
# grows across runs). Crashes go to fuzz/artifacts/<target>/, logs to fuzz/artifacts/logs/.
# Replay one input: fuzz/target/x86_64-unknown-linux-gnu/release/<target> <file>
# Exit status: non-zero if any target found a crash, leak, timeout or out-of-memory input.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export RUSTC_BOOTSTRAP=1

all_targets=(robots_parse_match config_load ua_identify path_canonicalize)
default_seconds="${FUZZ_SECONDS:-300}"
# libFuzzer's -runs=-1 means "no limit on executions"; the time limit still applies.
max_runs="${FUZZ_RUNS:--1}"
build_flags=(-O -a -s none)

# Longest input libFuzzer generates, per target: robots.txt bodies and configs need room; the
# robots target compares with the (quadratic) reference model only below 8 KiB.
max_len() {
    case "$1" in
        robots_parse_match | config_load) echo 8192 ;;
        *) echo 4096 ;;
    esac
}

runs=()
if [ "$#" -eq 0 ]; then
    for target in "${all_targets[@]}"; do runs+=("$target=$default_seconds"); done
else
    for arg in "$@"; do
        case "$arg" in
            *=*) runs+=("$arg") ;;
            *) runs+=("$arg=$default_seconds") ;;
        esac
    done
fi

cargo fuzz build "${build_flags[@]}"
bin_dir="fuzz/target/x86_64-unknown-linux-gnu/release"
mkdir -p fuzz/artifacts/logs

status=0
summary=()
for run in "${runs[@]}"; do
    target="${run%%=*}"
    seconds="${run#*=}"
    [ -d "fuzz/seeds/$target" ] || { echo "unknown target: $target" >&2; exit 2; }
    corpus="fuzz/corpus/$target"
    artifacts="fuzz/artifacts/$target"
    log="fuzz/artifacts/logs/$target.log"
    mkdir -p "$corpus" "$artifacts"
    dict=()
    [ -f "fuzz/dict/$target.dict" ] && dict=("-dict=fuzz/dict/$target.dict")
    echo "== $target: ${seconds}s (log: $log)"
    set +e
    "$bin_dir/$target" "$corpus" "fuzz/seeds/$target" \
        -max_total_time="$seconds" -runs="$max_runs" -max_len="$(max_len "$target")" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" \
        "${dict[@]}" >"$log" 2>&1
    code=$?
    set -e
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    # The corpus libFuzzer kept (files reduced away stay in the directory until a merge).
    corp=$(sed -n 's/.*DONE .* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' "$log")
    findings=$(find "$artifacts" -type f | wc -l)
    if [ "$code" -ne 0 ]; then
        status=1
        grep -E "^(==[0-9]+== ERROR|thread .* panicked|SUMMARY|artifact_prefix|Test unit written)" \
            "$log" | head -n 8 || true
    fi
    summary+=("$(printf '%-20s %6ss %12s execs %7s exec/s  corpus %-12s %3s artifacts  exit %s' \
        "$target" "$seconds" "${execs:-?}" "${rate:-?}" "${corp:-?}" "$findings" "$code")")
done

echo
printf '%s\n' "${summary[@]}"
exit "$status"

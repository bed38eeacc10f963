#!/usr/bin/env bash
# The robots.txt engine's cost per call under callgrind (with its cache and branch simulation):
# instructions, cache misses, mispredicted branches and a cycle estimate made of them, for a check
# (one Robots::verdict_inner call) and for parse + compile (RobotsTxt::parse_with_limit plus
# Robots::compile), on the small, medium and large benchmark files. Deterministic whatever else
# the machine runs, unlike the criterion times; for comparing two builds of the engine.
#
#   bench/engine-instructions.sh                    # the engine's bench as it is now
#   bench/engine-instructions.sh OLD_BIN NEW_BIN    # two built bench binaries, side by side
#
# A bench binary of another commit: `git worktree add /tmp/old COMMIT`, then in it
# `cargo bench --bench robots --no-run` (before the engine became crates/robotsguard-robots) or
# `cargo bench -p robotsguard-robots --bench robots --no-run`; cargo prints the executable's path.
# Each bench runs for 1 s of criterion's --profile-time under valgrind; the figures are per call,
# so the number of calls does not matter. Needs valgrind (installed from Debian when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
need valgrind valgrind

if [ "$#" -eq 0 ]; then
  bin=$(cargo bench -p robotsguard-robots --bench robots --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "robots" and m.get("executable"):
        print(m["executable"])')
  set -- "$bin"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Criterion keeps its state under the target directory; the runs here leave the project's alone.
export CARGO_TARGET_DIR="$work"

run() { # BIN BENCH FUNCTION...
  local bin=$1 bench=$2 out="$work/profile"
  shift 2
  valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes --callgrind-out-file="$out" \
    --compress-strings=no --compress-pos=no "$bin" --bench --profile-time 1 "^$bench\$" >/dev/null 2>&1
  for function in "$@"; do
    printf '%-24s %-30s %s  %s\n' "$bench" "$function" "$(bench/callgrind_per_call.py "$out" "$function")" "$bin"
  done
}
for bench in check_exact/small check_exact/medium check_exact/large \
  check_canonical/small check_canonical/medium check_canonical/large; do
  for bin in "$@"; do run "$bin" "$bench" '::Robots::verdict_inner'; done
done
for bench in parse_compile/small parse_compile/medium parse_compile/large; do
  for bin in "$@"; do run "$bin" "$bench" '::RobotsTxt::parse_with_limit' '::Robots::compile'; done
done

#!/usr/bin/env bash
# What the Crawl-delay admission adds to the decision, in rounds that alternate between builds
# (benches/decide.rs, group decide_crawl_delay): each round runs one build's three cases and
# prints the two admission cases against its own decide_only, so a slow moment of the machine
# weighs on both sides of a ratio alike. Medians per build at the end.
#
#   bench/crawl-delay-rounds.sh                       # this checkout, 8 rounds
#   ROUNDS=8 bench/crawl-delay-rounds.sh OLD_BIN NEW_BIN   # bench binaries, in turns
#
# A bench binary is what `cargo bench --bench decide --no-run` names; copy it aside before
# building another commit (the file name does not change with the source).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-8}

if [ $# -eq 0 ]; then
    binary=$(cargo bench --bench decide --no-run --message-format=json |
        python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "decide" and m.get("executable"):
        print(m["executable"])')
    if [ -z "$binary" ]; then
        echo "crawl-delay-rounds: cargo named no decide bench binary" >&2
        exit 1
    fi
    set -- "$binary"
fi

results=$(mktemp)
log=$(mktemp)
trap 'rm -f "$results" "$log"' EXIT

# Criterion's point estimate of each case, in nanoseconds per mix, in the order it runs them.
estimates() {
    "$1" --bench --warm-up-time 1 --measurement-time 2 decide_crawl_delay 2>"$log" |
        awk '/time:/ && !/%/ { gsub(/\[|\]/, "")
            scale = ($5 == "ns") ? 1 : ($5 == "µs" || $5 == "us") ? 1e3 : ($5 == "ms") ? 1e6 : -1
            if (scale < 0) { print "unknown unit " $5 > "/dev/stderr"; exit 1 }
            print $4 * scale }'
}

for round in $(seq 1 "$ROUNDS"); do
    for binary in "$@"; do
        read -r only returning new <<<"$(estimates "$binary" | tr '\n' ' ')"
        if [ -z "$new" ]; then
            cat "$log" >&2
            echo "crawl-delay-rounds: $binary did not report three cases" >&2
            exit 1
        fi
        awk -v b="$binary" -v r="$round" -v o="$only" -v t="$returning" -v n="$new" 'BEGIN {
            printf "%s\tround %d\tdecide_only %.0f ns\treturning %+.1f %%\tnew clients %+.1f %%\n",
                b, r, o, (t / o - 1) * 100, (n / o - 1) * 100 }' | tee -a "$results"
    done
done

echo
for binary in "$@"; do
    awk -F'\t' -v b="$binary" '
        $1 != b { next }
        { count++; split($4, t, " "); split($5, n, " "); ret[count] = t[2]; new[count] = n[3] }
        function median(a, count,   i, j, v, sorted) {
            for (i = 1; i <= count; i++) sorted[i] = a[i]
            for (i = 2; i <= count; i++) { v = sorted[i]; j = i - 1
                while (j > 0 && sorted[j] > v) { sorted[j + 1] = sorted[j]; j-- }
                sorted[j + 1] = v }
            return count % 2 ? sorted[(count + 1) / 2] : (sorted[count / 2] + sorted[count / 2 + 1]) / 2
        }
        END { printf "%s: median returning %+.1f %%, new clients %+.1f %% (%d rounds)\n",
            b, median(ret, count), median(new, count), count }' "$results"
done

#!/usr/bin/env python3
"""Events per call of one function, inclusive, from a callgrind profile written with
--compress-strings=no --compress-pos=no (bench/engine-instructions.sh): sums the calls= lines to
the function whose name ends with the given one, and the cost line after each (every event the
profile records: instructions and, with --cache-sim/--branch-sim, cache misses and mispredicted
branches)."""
import sys
path, needle = sys.argv[1], sys.argv[2]
events = []
calls = 0
totals = None
cfn = None
pending = None
with open(path) as f:
    for line in f:
        line = line.rstrip("\n")
        if line.startswith("events:"):
            events = line.split()[1:]
            totals = [0] * len(events)
        elif line.startswith("cfn="):
            cfn = line[4:]
        elif line.startswith("calls="):
            pending = int(line[6:].split()[0]) if (cfn or "").endswith(needle) else None
        elif pending is not None:
            parts = [int(x) for x in line.split()[1:]]
            calls += pending
            for i, v in enumerate(parts):
                totals[i] += v
            pending = None
if not calls:
    print("no calls")
    sys.exit()
per = {e: t / calls for e, t in zip(events, totals)}
text = " ".join(f"{e}={v:.1f}" for e, v in per.items())
if "D1mr" in per:
    # The usual estimate: an L1 miss ~10 cycles, a last-level miss ~100, a mispredicted branch ~15.
    l1 = per["I1mr"] + per["D1mr"] + per["D1mw"]
    ll = per["ILmr"] + per["DLmr"] + per["DLmw"]
    mispredicted = per.get("Bcm", 0) + per.get("Bim", 0)
    text += f" est_cycles={per['Ir'] + 10 * l1 + 100 * ll + 15 * mispredicted:.1f}"
print(f"calls={calls} {text}")

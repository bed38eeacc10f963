#!/usr/bin/env python3
"""Where robotsguard's per-request cost differs from the production pass-through's, by function.

Reads the profiles that `KEEP=DIR bench/proxy-instructions.sh` keeps (with `CACHE_SIM=1`, the
simulated cache and branch events too) and prints, per request and for one event, each
function's own cost (not what it calls) in robotsguard and in the production pass-through, the
largest differences first:

    CACHE_SIM=1 ROUNDS=1 DURATION=10 KEEP=/tmp/cg bench/proxy-instructions.sh
    bench/callgrind-diff.py /tmp/cg --event I1mr --top 30

With --decision, the KEEP directory is bench/decision-cost.sh's, and the sides are robotsguard
per decision (nginx's auth_request way) against robotsguard per inline proxied request:

    ROUNDS=1 KEEP=/tmp/dc bench/decision-cost.sh
    bench/callgrind-diff.py /tmp/dc --decision --top 30

With `--before OTHER_KEEP`, the same for robotsguard against robotsguard in another KEEP
directory (an older build's profiles, measured the same way): where a change between two builds
moved the per-request cost. `--by-module` sums the rows by the path of each function (its crate
and first module, `robotsguard::judge`, `pingora_core::protocols`), so that inlining across
functions of one module does not scatter a difference over many rows:

    BINARIES=OLD ROUNDS=3 DURATION=10 KEEP=/tmp/old bench/proxy-instructions.sh
    BINARIES=NEW ROUNDS=3 DURATION=10 KEEP=/tmp/new bench/proxy-instructions.sh
    bench/callgrind-diff.py /tmp/new --before /tmp/old --by-module

Events: Ir (instructions), and with CACHE_SIM=1 also I1mr (instruction-cache misses), D1mr and
D1mw (data-cache read and write misses), Bcm and Bim (mispredicted conditional and indirect
branches). A function inlined into a different caller in one binary than in the other shows as a
plus in one name and a minus in another; compare the two before reading either alone
(docs/BENCHMARKS.md, issue 34, step 37).

Everything the process ran in the measured window is divided by the requests the load generator
completed: timers and background work too, and whatever of start-up had not finished when the
counters were zeroed. Rows such as certificate loading or robots.txt parsing are not per-request costs.

The total is the sum of the cost lines (callgrind's `totals:`), a little above the `summary:`
that bench/proxy-instructions.sh divides. callgrind_annotate sums by file and line as well as by
function, and repeats a function once per file its inlined code came from; this reads the
profile's cost lines itself so that each function is one row. Only the standard library is used.
"""

import argparse
import collections
import re
import signal
import sys
from pathlib import Path

# A compressed name: "(12) name" defines id 12, "(12)" refers to it.
COMPRESSED = re.compile(r"\((\d+)\)(?:\s+(.*))?")


def self_costs(path):
    """Each function's own cost per event, summed over the file, and the event names."""
    names = {}
    costs = collections.defaultdict(collections.Counter)
    events = []
    # How many position columns lead each cost line: "line", or "instr line" (--dump-instr=yes).
    positions = 1
    current = None
    # The line after `calls=` is the cost of the call (the callee's inclusive cost), not the
    # caller's own.
    call_cost_next = False

    def name(spec):
        match = COMPRESSED.match(spec)
        if not match:
            return spec
        if match.group(2):
            names[match.group(1)] = match.group(2)
        return names.get(match.group(1), match.group(1))

    with open(path, errors="replace") as profile:
        for line in profile:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("positions:"):
                positions = len(line.split()) - 1
            elif line.startswith("fn="):
                current = name(line[3:].strip())
                call_cost_next = False
            elif line.startswith("cfn="):
                name(line[4:].strip())
            elif line.startswith("calls="):
                call_cost_next = True
            elif line[:1].isdigit() or line[:1] in ("+", "-", "*"):
                if call_cost_next:
                    call_cost_next = False
                    continue
                if current is None:
                    continue
                # The positions, then one count per event; trailing zeros are left out.
                for event, value in zip(events, line.split()[positions:]):
                    costs[current][event] += int(value)
    merged = collections.defaultdict(collections.Counter)
    for function, counts in costs.items():
        # Recursion shows as `name'2`: one function.
        merged[re.sub(r"'\d+$", "", function)].update(counts)
    return merged, events


def module_of(function):
    """The crate and first module of a function's path: `robotsguard::judge` for
    `robotsguard::judge::phases::Judge::identify`, and for `<T as Trait>::f` those of T; a symbol
    without a path (C code, the allocator's) as it is."""
    name = function.lstrip("<&*").removeprefix("mut ").removeprefix("dyn ")
    # Up to the first generic argument, space or closing of a qualified path.
    path = re.split(r"[<> (]", name, maxsplit=1)[0]
    parts = [part for part in path.split("::") if part]
    if len(parts) < 2:
        return function
    return "::".join(parts[:2])


def requests_of(count_file):
    text = count_file.read_text().strip()
    if not text.isdigit():
        sys.exit(f"{count_file}: no request count (the load generator's completed requests)")
    requests = int(text)
    if requests == 0:
        sys.exit(f"{count_file}: the load generator completed no requests")
    return requests


def at_least_one(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def main():
    # Output piped into `head` ends quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kept", help="the KEEP directory of bench/proxy-instructions.sh")
    parser.add_argument("--event", default="Ir", help="Ir, I1mr, D1mr, D1mw, Bcm, Bim (default Ir)")
    parser.add_argument("--round", type=at_least_one, default=1,
                        help="which round's profiles (default 1)")
    parser.add_argument("--top", type=at_least_one, default=25,
                        help="rows each way (default 25)")
    parser.add_argument("--against", default="passthrough-production",
                        choices=("passthrough-production", "passthrough"),
                        help="the other side (default: the production pass-through)")
    parser.add_argument("--decision", action="store_true",
                        help="a KEEP directory of bench/decision-cost.sh: decision against inline")
    parser.add_argument("--before", metavar="KEEP",
                        help="the other side is robotsguard in this KEEP directory (an older "
                             "build), not a pass-through of the same one")
    parser.add_argument("--by-module", action="store_true",
                        help="sum the rows by crate and first module")
    args = parser.parse_args()

    kept = Path(args.kept)
    if args.before:
        other_label = "robotsguard (before)"
        places = {"robotsguard": (kept, "robotsguard"),
                  other_label: (Path(args.before), "robotsguard")}
    else:
        other_label = args.against
        places = {"robotsguard": (kept, "robotsguard"), other_label: (kept, args.against)}
    sides = {}
    if args.decision:
        decision_sides(kept, args, sides)
        show_sides(sides, ("decision", "inline"), args)
        return
    for label, (folder, name) in places.items():
        # The dump made on request (after the warm-up was zeroed) is the one with suffix .1.
        profile = folder / f"{name}.r{args.round}.out.1"
        count_file = folder / f"{name}.r{args.round}.requests"
        for path in (profile, count_file):
            if not path.is_file():
                sys.exit(f"{path}: not found (a KEEP directory of bench/proxy-instructions.sh, "
                         f"round {args.round}?)")
        costs, events = self_costs(profile)
        if args.event not in events:
            simulated = args.event in ("Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw",
                                       "Bc", "Bcm", "Bi", "Bim")
            hint = "; the cache and branch events need CACHE_SIM=1" if simulated else ""
            sys.exit(f"{profile} has no {args.event} (events: {' '.join(events)}){hint}")
        requests = requests_of(count_file)
        per_request = collections.Counter()
        for function, counts in costs.items():
            key = module_of(function) if args.by_module else function
            per_request[key] += counts[args.event] / requests
        sides[label] = (per_request, requests)

    show_sides(sides, ("robotsguard", other_label), args)


def decision_sides(kept, args, sides):
    """bench/decision-cost.sh's profiles of robotsguard: its dumps are numbered in the order of
    the ways (alone, auth, inline) and its results file has each way's completed requests."""
    ways = ("alone", "auth", "inline")
    requests = {}
    results = kept / "results"
    if not results.is_file():
        sys.exit(f"{results}: not found (a KEEP directory of bench/decision-cost.sh?)")
    for line in results.read_text().splitlines():
        fields = line.split()
        if fields[:2] == ["ir", str(args.round)]:
            requests[fields[2]] = int(fields[3])
    for label, way in (("decision", "auth"), ("inline", "inline")):
        profile = kept / f"r{args.round}" / f"guard.out.{ways.index(way) + 1}"
        if not profile.is_file() or not requests.get(way):
            sys.exit(f"{profile}: not found, or no requests for {way} in {results}")
        costs, events = self_costs(profile)
        if args.event not in events:
            sys.exit(f"{profile} has no {args.event} (events: {' '.join(events)})")
        per_request = collections.Counter()
        for function, counts in costs.items():
            key = module_of(function) if args.by_module else function
            per_request[key] += counts[args.event] / requests[way]
        sides[label] = (per_request, requests[way])


def show_sides(sides, labels, args):
    mine_label, other_label = labels
    guard, guard_requests = sides[mine_label]
    other, other_requests = sides[other_label]
    what = "each module's functions" if args.by_module else "each function"
    print(f"{args.event} per request, own cost of {what}: {mine_label} ({guard_requests} "
          f"requests) against {other_label} ({other_requests})")
    print(f"total\t{sum(guard.values()):,.1f}\t{sum(other.values()):,.1f}")
    rows = sorted(((guard.get(f, 0.0) - other.get(f, 0.0), guard.get(f, 0.0), other.get(f, 0.0), f)
                   for f in set(guard) | set(other)), reverse=True)
    gains = [row for row in rows if row[0] > 0][:args.top]
    # Largest first, as the gains.
    losses = [row for row in reversed(rows) if row[0] < 0][:args.top]
    def show(rows):
        for difference, mine, theirs, function in rows:
            print(f"{difference:+,.1f}\t{mine:,.1f}\t{theirs:,.1f}\t{function}")

    print(f"difference\t{mine_label}\t{other_label}\t{'module' if args.by_module else 'function'}")
    show(gains)
    if losses:
        print("...")
        show(losses)

if __name__ == "__main__":
    main()

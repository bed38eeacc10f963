#!/usr/bin/env python3
"""Writes the lists the docs and the chart repeat from the generated references, so that no copy
drifts: the restart-only settings (from docs/src/reference/configuration.md) into the reload and
Kubernetes pages and the chart's RobotsguardRestartRequired alert, and the decision words (from
docs/src/reference/metrics.md) into the logs page. Run by scripts/gen-docs.sh after it writes the
references; tests/it/docs_generated.rs checks every copy."""
import re
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent


def sentence(path, prefix):
    for line in (root / path).read_text().splitlines():
        if line.startswith(prefix) and line.endswith("."):
            return line[len(prefix):-1]
    sys.exit(f"fill-generated-lists: {path} has no line starting {prefix!r}")


def fill(path, marker, text):
    file = root / path
    body = file.read_text()
    pattern = re.compile(r"(<!-- " + marker + r"[^>]*-->)(.*?)(<!-- /" + marker + r" -->)", re.S)
    if not pattern.search(body):
        sys.exit(f"fill-generated-lists: {path} has no <!-- {marker} --> ... <!-- /{marker} -->")
    file.write_text(pattern.sub(lambda m: m.group(1) + text + m.group(3), body))


restart = sentence("docs/src/reference/configuration.md",
                   "The restart-only settings, with every key below them: ")
decisions = sentence("docs/src/reference/metrics.md",
                     "Every `decision` of `robotsguard_requests_total` and of the access log, "
                     "the same words in both: ")
for page in ("docs/src/operations/reload.md", "docs/src/kubernetes.md"):
    fill(page, "restart-only", restart)
fill("docs/src/operations/logs.md", "decisions", decisions)

values = root / "helm/robotsguard/values.yaml"
text = values.read_text()
alert = re.compile(r"(apply only on restart \()([^)]*)(\))")
if not alert.search(text):
    sys.exit("fill-generated-lists: values.yaml's RobotsguardRestartRequired names no list")
values.write_text(alert.sub(lambda m: m.group(1) + restart.replace("`", "") + m.group(3), text, count=1))

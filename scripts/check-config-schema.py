#!/usr/bin/env python3
"""Checks config/robotsguard.schema.json against real configs and broken ones.

Usage: check-config-schema.py [EXTRA_CONFIG.yaml ...]

Every example config of the repository (config/robotsguard.yaml, config/examples/*.yaml,
deploy/compose/robotsguard*.yaml, examples/*.yaml) and every file named on the command line (a
Helm-rendered config) must validate; each invalid sample below must be refused. The example
files must also start with the `# yaml-language-server: $schema=` line that points editors at
the schema. Needs jsonschema and PyYAML (scripts/helm-ci-requirements.txt). Exits 1 listing every
problem.
"""

import glob
import json
import os
import sys

import jsonschema
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "config", "robotsguard.schema.json")
EXAMPLES = ["config/robotsguard.yaml", "config/examples/*.yaml",
            "deploy/compose/robotsguard*.yaml", "examples/*.yaml"]
MODELINE = "# yaml-language-server: $schema="

MINIMAL = "origins: [{name: shop, hosts: [shop.example], upstream: '127.0.0.1:8081'}]\n"
# (why it is wrong, the config): each must be refused by the schema.
INVALID = [
    ("no origins", "listen: ['127.0.0.1:8080']\n"),
    ("an unknown top-level key", MINIMAL + "listn: ['127.0.0.1:8080']\n"),
    ("an unknown key in defaults", MINIMAL + "defaults: {mood: enforce}\n"),
    ("a mode that is no word of it", MINIMAL + "defaults: {mode: block}\n"),
    ("a duration without a unit", MINIMAL + "defaults: {dns_refresh: 30}\n"),
    ("a duration with a bad unit", MINIMAL + "shutdown: {grace: 10 seconds}\n"),
    ("a status out of range", MINIMAL + "defaults: {block: {status: 200}}\n"),
    ("threads out of range", MINIMAL + "threads: 0\n"),
    ("an origin without upstream", "origins: [{name: shop, hosts: [shop.example]}]\n"),
    ("an unknown key in an origin", "origins: [{name: a, hosts: [a], upstream: 'h:1', mde: off}]\n"),
    ("robots in the wrong place", MINIMAL + "robots: {source: file}\n"),
    ("an unknown robots source", "origins: [{name: a, hosts: [a], upstream: 'h:1', robots: {source: s3}}]\n"),
    ("an unknown category in policy", MINIMAL + "defaults: {policy: {categories: {ai-scraping: block}}}\n"),
    ("a policy action that is no word of it", MINIMAL + "defaults: {policy: {crawlers: {GPTBot: deny}}}\n"),
    ("a size with a fraction", MINIMAL + "defaults: {robots: {max_size: 1.5MiB}}\n"),
    ("a listener without address", MINIMAL + "listen: [{tls: {cert: a.pem, key: a.key}}]\n"),
    ("an unknown state backend", MINIMAL + "state: {backend: memcached}\n"),
    ("an unknown key in state.redis", MINIMAL + "state: {backend: redis, redis: {uri: 'redis://h'}}\n"),
    ("verify.dns with a text max_entries", MINIMAL + "verify: {dns: {max_entries: many}}\n"),
    ("an extra crawler without name", MINIMAL + "crawlers: {extra: [{tokens: [x]}]}\n"),
    ("offenders with an unknown scope", MINIMAL + "defaults: {offenders: {scope: everyone}}\n"),
    ("an access log format that is no word of it", MINIMAL + "access_log: {format: xml}\n"),
]


def main():
    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    files = []
    for pattern in EXAMPLES:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            files.append((path, True))
    files += [(path, False) for path in sys.argv[1:]]
    if len(files) < 5:
        problems.append(f"only {len(files)} example configs found")
    for path, needs_modeline in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        name = os.path.relpath(path, ROOT)
        if needs_modeline and not text.startswith(MODELINE):
            problems.append(f"{name}: does not start with `{MODELINE}...`")
        for error in validator.iter_errors(yaml.safe_load(text)):
            where = "/".join(str(p) for p in error.absolute_path) or "(top)"
            problems.append(f"{name}: {where}: {error.message[:200]}")
    for why, text in INVALID:
        if validator.is_valid(yaml.safe_load(text)):
            problems.append(f"the schema accepts {why}: {text!r}")
    if validator.is_valid(yaml.safe_load(MINIMAL)) is False:
        problems.append("the schema refuses the minimal config")
    for problem in problems:
        print(f"check-config-schema: {problem}", file=sys.stderr)
    if problems:
        print("check-config-schema: regenerate the schema with scripts/gen-docs.sh "
              "(from src/config/reference.rs)", file=sys.stderr)
        return 1
    print(f"check-config-schema: {len(files)} configs valid, {len(INVALID)} invalid samples refused",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

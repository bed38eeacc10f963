#!/usr/bin/env python3
"""Checks the internal links of README.md and the book (docs/src/).

Every relative link must name a file that exists and, with `#anchor`, a heading (mdBook's slug)
or an explicit `<a id="...">` of that file. A page of the book may only link inside docs/src/
(the book is published without the rest of the repository); README.md may link anywhere in it.
Every page under docs/src/ must be listed in SUMMARY.md, and every page SUMMARY.md lists must
exist. `{{#include FILE}}` lines are followed. Exits 1 listing every broken link.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOK = os.path.join(ROOT, "docs", "src")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INCLUDE = re.compile(r"\{\{#include\s+([^}\s]+)\s*\}\}")
FENCE = re.compile(r"^\s*(```|~~~)")


def expand(path, seen=()):
    """The file's text with its {{#include}} lines replaced, as mdBook renders it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()

    def include(match):
        target = os.path.normpath(os.path.join(os.path.dirname(path), match.group(1)))
        if target in seen or not os.path.isfile(target):
            return match.group(0)
        return expand(target, seen + (path,))

    return INCLUDE.sub(include, text)


def prose(text, keep_code=False):
    """Lines outside fenced code blocks and HTML comments, with inline code removed."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line if keep_code else re.sub(r"`[^`]*`", "", line))
    return out


def slug(heading):
    """mdBook's id for a heading: lower case, spaces to '-', punctuation dropped."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = text.replace("`", "")
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def anchors(path):
    text = expand(path)
    found, counts = set(), {}
    for line in prose(text, keep_code=True):
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            base = slug(m.group(1))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    found.update(re.findall(r"<a\s+id=\"([^\"]+)\"", text))
    return found


def main():
    problems = []
    files = [os.path.join(ROOT, "README.md")]
    for dirpath, _, names in os.walk(BOOK):
        files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".md")]
    cache = {}
    checked = 0
    for path in files:
        in_book = path.startswith(BOOK + os.sep)
        name = os.path.relpath(path, ROOT)
        for number, line in enumerate(prose(expand(path)), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                    continue  # an external URL or mailto:
                checked += 1
                file_part, _, anchor = target.partition("#")
                dest = path if not file_part else os.path.normpath(
                    os.path.join(os.path.dirname(path), file_part))
                if not os.path.exists(dest):
                    problems.append(f"{name}: link to a missing file: {target}")
                    continue
                if in_book and not dest.startswith(BOOK):
                    problems.append(f"{name}: a book page links outside docs/src/: {target}")
                    continue
                if anchor and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        problems.append(f"{name}: no anchor #{anchor} in {os.path.relpath(dest, ROOT)}")
    summary = os.path.join(BOOK, "SUMMARY.md")
    with open(summary, encoding="utf-8") as f:
        listed = {os.path.normpath(os.path.join(BOOK, t)) for t in
                  re.findall(r"\]\(([^)]+\.md)\)", re.sub(r"<!--.*?-->", "", f.read(), flags=re.S))}
    for path in files:
        if path.startswith(BOOK + os.sep) and path != summary and path not in listed:
            problems.append(f"{os.path.relpath(path, ROOT)}: not listed in docs/src/SUMMARY.md")
    for path in listed:
        if not os.path.isfile(path):
            problems.append(f"docs/src/SUMMARY.md lists a missing page: {os.path.relpath(path, ROOT)}")
    for problem in problems:
        print(f"check-doc-links: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check-doc-links: {checked} internal links in {len(files)} files resolve", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

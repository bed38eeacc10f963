#!/usr/bin/env python3
"""The longest functions under a folder (default src/), test modules included: a function runs
from its `fn` line to the brace that closes its body. Braces inside strings, chars and comments
are skipped. Usage: scripts/longest-functions.py [DIR] [COUNT]"""
import re, sys, pathlib

FN = re.compile(r'^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+"[^"]*"\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)')


def code_only(line, state):
    """The line without string/char contents and comments; `state` carries an open block
    comment or string across lines."""
    out = []
    i = 0
    while i < len(line):
        c = line[i]
        if state['block']:
            if line.startswith('*/', i):
                state['block'] = False
                i += 2
                continue
            i += 1
            continue
        if state['str']:
            if c == '\\':
                i += 2
                continue
            if c == '"':
                state['str'] = False
            i += 1
            continue
        if line.startswith('//', i):
            break
        if line.startswith('/*', i):
            state['block'] = True
            i += 2
            continue
        m = re.match(r'r(#*)"', line[i:])
        if m and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == '_')):
            end = '"' + m.group(1)
            j = line.find(end, i + len(m.group(0)))
            i = len(line) if j < 0 else j + len(end)
            continue
        if c == '"':
            state['str'] = True
            i += 1
            continue
        if c == "'":
            m = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|[^\\'])'", line[i:])
            if m:
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return ''.join(out)


def functions(path):
    lines = path.read_text(errors='replace').split('\n')
    state = {'block': False, 'str': False}
    code = [code_only(l, state) for l in lines]
    for start, text in enumerate(code):
        m = FN.match(text)
        if not m:
            continue
        depth = 0
        opened = False
        for end in range(start, len(code)):
            for ch in code[end]:
                if ch == '{':
                    depth += 1
                    opened = True
                elif ch == '}':
                    depth -= 1
                elif ch == ';' and not opened and depth == 0:
                    break  # a declaration without a body
            else:
                if opened and depth == 0:
                    yield m.group(1), start + 1, end - start + 1
                    break
                continue
            break


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else 'src')
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    found = []
    for path in sorted(root.rglob('*.rs')):
        for name, line, length in functions(path):
            found.append((length, f'{path}:{line}', name))
    found.sort(key=lambda f: (-f[0], f[1]))
    for length, where, name in found[:count]:
        print(f'{length:5}  {name}  {where}')


main()

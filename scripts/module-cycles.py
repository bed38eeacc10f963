#!/usr/bin/env python3
"""Import circles between modules: among the proxy crate's top-level modules (src/*: every
`crate::MODULE` reference is an edge), among the submodules of each of them (src/MODULE/*:
`crate::MODULE::SUB`, `super::SUB` from a file directly in the folder, `super::super::SUB` from
one a level deeper) and among the binary's modules (src/bin/robotsguard/*: `crate::MODULE`).
References in comments and test modules do not count. Prints each circle and the lines that make
it, and exits 1 when there is one (ARCHITECTURE.md: no room uses a room listed after it)."""
import re, glob, sys, os

sys.setrecursionlimit(10000)


def code_lines(path):
    text = open(path).read().split('#[cfg(test)]')[0]
    for number, line in enumerate(text.split('\n'), 1):
        if not line.strip().startswith('//'):
            yield number, line


def circles(mods):
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in mods.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in list(mods):
        if v not in index:
            visit(v)
    return found


def report(title, mods, where):
    found = circles(mods)
    for component in found:
        print(f"{title}: {sorted(component)}")
        for a in sorted(component):
            for b in sorted(x for x in mods[a] if x in component):
                print(f"  {a} -> {b}: {where[(a, b)][:2]}")
    return len(found)


def graph(files, node_of, patterns):
    """Edges from each file's node to the nodes its references name."""
    mods, where = {}, {}
    for path in files:
        node = node_of(path)
        if node is None:
            continue
        for number, line in code_lines(path):
            for pattern in patterns(path):
                for target in re.findall(pattern, line):
                    if target != node:
                        mods.setdefault(node, set()).add(target)
                        where.setdefault((node, target), []).append(f"{path}:{number}")
    return mods, where


found = 0
library = [f for f in glob.glob('src/**/*.rs', recursive=True) if not f.startswith('src/bin')]


def top_of(path):
    top = path[4:].split('/')[0].replace('.rs', '')
    return None if top == 'lib' else top


found += report('crate', *graph(library, top_of, lambda path: [r'crate::([a-z_][a-z0-9_]*)']))

for folder in sorted(d for d in glob.glob('src/*/') if not d.startswith('src/bin')):
    top = folder[4:-1]
    files = glob.glob(f'{folder}**/*.rs', recursive=True)

    def sub_of(path, folder=folder):
        rest = path[len(folder):].split('/')
        name = rest[0].replace('.rs', '')
        return None if name == 'mod' else name

    def patterns(path, folder=folder, top=top):
        depth = path[len(folder):].count('/')
        up = 'super::' * (depth + 1)
        return [rf'crate::{top}::([a-z_][a-z0-9_]*)', rf'(?<![a-z_:]){up}([a-z_][a-z0-9_]*)']

    found += report(f'src/{top}', *graph(files, sub_of, patterns))

binary = glob.glob('src/bin/robotsguard/**/*.rs', recursive=True)


def bin_of(path):
    name = path[len('src/bin/robotsguard/'):].split('/')[0].replace('.rs', '')
    return None if name == 'main' else name


found += report('binary', *graph(binary, bin_of, lambda path: [r'crate::([a-z_][a-z0-9_]*)']))
sys.exit(1 if found else 0)

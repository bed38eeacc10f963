#!/usr/bin/env python3
"""Import circles between modules: among the proxy crate's top-level modules (src/*: every
`crate::MODULE` reference is an edge), among the submodules of each of them (src/MODULE/*:
`crate::MODULE::SUB`, `super::SUB` from a file directly in the folder, `super::super::SUB` from
one a level deeper) and among the binary's modules (src/bin/robotsguard/*: `crate::MODULE`).
References in comments and test modules do not count. Prints each circle and the lines that make
it, and exits 1 when there is one (ARCHITECTURE.md: no room uses a room listed after it).
Also checks src/lib.rs's layer list: every top-level module is named in exactly one layer, and
none uses a module of a layer above its own."""
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


crate_edges, crate_where = graph(library, top_of, lambda path: [r'crate::([a-z_][a-z0-9_]*)'])
found += report('crate', crate_edges, crate_where)


def layers():
    """Each module's layer in src/lib.rs's list (`//! N. ...`, continued on indented lines):
    the names it gives in backticks that are modules; a module named twice maps to a list."""
    named, layer = {}, None
    for line in open('src/lib.rs'):
        if not line.startswith('//!'):
            continue
        text = line[3:]
        item = re.match(r' (\d+)\. ', text)
        if item:
            layer = int(item.group(1))
        elif not text.startswith('    ') or not text.strip():
            layer = None
        if layer is None:
            continue
        for name in re.findall(r'`([a-z_][a-z0-9_]*)`', text):
            named.setdefault(name, []).append(layer)
    return named


modules = {top_of(path) for path in library} - {None}
# The engine and the catalogue are crates of their own, used at these paths.
modules |= {'robots', 'crawlers'}
named = layers()
for module in sorted(modules):
    places = sorted(set(named.get(module, [])))
    if len(places) != 1:
        print(f"src/lib.rs layers: `{module}` is named in {len(places)} layers {places}, not one")
        found += 1
for a in sorted(crate_edges):
    for b in sorted(crate_edges[a]):
        if b not in modules or len(set(named.get(a, []))) != 1 or len(set(named.get(b, []))) != 1:
            continue
        if named[b][0] > named[a][0]:
            print(f"src/lib.rs layers: {a} (layer {named[a][0]}) uses {b} (layer {named[b][0]}): "
                  f"{crate_where[(a, b)][:2]}")
            found += 1

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

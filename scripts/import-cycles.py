#!/usr/bin/env python3
"""Lists the circles of imports between the Rust files of each crate.

A file is a module (`agent/state.rs` is `agent::state`); it imports another
when its code (comments and its `#[cfg(test)] mod tests` block left out)
names a path into it: `use super::sync::Sync`, `crate::pipeline::pass(..)`,
`use super::{io, shared}`. A parent's `mod` and `pub use` of its children
are declarations, not imports. A circle is a set of files that import each
other through any path (Tarjan's strongly connected components).

    scripts/import-cycles.py [CRATE_SRC_DIR ...]   (default: every crate)

Exits 1 and prints each circle when there is one; prints nothing and exits
0 otherwise. scripts/test.sh runs it in the style job.
"""
import os
import re
import sys


def modules(root):
    files = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            if f.endswith('.rs'):
                p = os.path.join(d, f)
                rel = os.path.relpath(p, root)[:-3].split(os.sep)
                if rel[-1] == 'mod':
                    rel = rel[:-1]
                if rel in (['lib'], ['main']):
                    rel = []
                files['::'.join(rel)] = p
    return files


def code(path):
    text = '\n'.join(line.split('//')[0] for line in open(path, encoding='utf-8'))
    return re.split(r'#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod tests\s*\{', text)[0]


def resolve(files, cur, path):
    parts = path.split('::')
    if parts[0] == 'crate':
        base, parts = [], parts[1:]
    elif parts[0] == 'super':
        base = cur.split('::')[:-1] if cur else []
        parts = parts[1:]
        while parts and parts[0] == 'super':
            base, parts = base[:-1], parts[1:]
    elif parts[0] == 'self':
        base, parts = (cur.split('::') if cur else []), parts[1:]
    else:
        return None
    for n in range(len(parts), -1, -1):
        m = '::'.join(x for x in base + parts[:n] if x)
        if m in files:
            return m
    return None


def edges(files):
    out = {m: set() for m in files}
    ident = r'[A-Za-z_][A-Za-z0-9_]*'
    for m, p in files.items():
        c = code(p)
        found = [x.group(1) for x in re.finditer(r'\b((?:crate|super|self)(?:::' + ident + r')+)', c)]
        for g in re.finditer(r'\b((?:crate|super|self)(?:::' + ident + r')*)::\{([^}]*)\}', c):
            found += [g.group(1) + '::' + i.strip().split('::')[0]
                      for i in g.group(2).split(',') if i.strip() and i.strip() != 'self']
        for path in found:
            t = resolve(files, m, path)
            # A module and its descendants, and the crate root, are not edges.
            if t and t != m and not t.startswith(m + '::') and not m.startswith(t + '::'):
                out[m].add(t)
    return out


def circles(graph):
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    roots = sys.argv[1:] or sorted(
        os.path.join(repo, d, 'src')
        for d in ['host'] + ['crates/' + c for c in os.listdir(os.path.join(repo, 'crates'))]
        if os.path.isdir(os.path.join(repo, d, 'src')))
    bad = 0
    for root in roots:
        for c in circles(edges(modules(root))):
            bad += 1
            print(f'{os.path.relpath(root, repo)}: a circle of imports: {" -> ".join(c)}')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())

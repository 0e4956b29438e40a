#!/usr/bin/env python3
"""Lists the circles of imports between the Rust files of each crate.

A file is a module (`agent/state.rs` is `agent::state`); it imports another
when its code (comments and its `#[cfg(test)] mod ...` blocks left out)
names a path into it: `use super::sync::Sync`, `crate::pipeline::pass(..)`,
`use super::{io, shared::{Ctx, Shared}}` (groups nest), and, in a parent,
`work::run(..)` or `use work::Item` for a child it declares. A parent's
`mod` and `pub use` of its descendants are declarations, not imports; the
crate root (lib.rs, main.rs) is left out. A circle is a set of files that
import each other through any path (Tarjan's strongly connected components),
a parent and its own child included.

A child that only names its parent's types and constants (`super::Error`,
`super::Result`, a limit) is the usual shape of a Rust module, not a tie
between two ideas: such an import is left out of the graph when ALLOW
names it, with the reason. One that names a function, a module or a glob
stays in, and ALLOW cannot excuse it (the check says so).

    scripts/import-cycles.py [CRATE_SRC_DIR ...]   (default: every crate)

Exits 1 and prints each circle (with the names each of its parent-child
imports names), each ALLOW entry that excuses more than types, and each
ALLOW entry no longer used; prints nothing and exits 0 otherwise.
scripts/test.sh runs it in the style job; scripts/import_cycles_test.py
tests it.
"""
import os
import re
import sys

IDENT = r'[A-Za-z_][A-Za-z0-9_]*'

# (crate src dir relative to the repository, child, ancestor): why the
# child's import of its ancestor is no tie. Only types and constants.
ALLOW = {
    ('crates/engine/src', 'cri::absent', 'cri'): "the module's error type",
    ('crates/engine/src', 'cri::client', 'cri'): "the module's error type",
    ('crates/engine/src', 'cri::endpoint', 'cri'): "the module's error type",
    ('crates/engine/src', 'config::plugins', 'config'): "the config's error and duration types",
    ('crates/engine/src', 'config::values', 'config'): "the config's error type",
    ('crates/engine/src', 'streams::source', 'streams'): "the longest pending line, a limit of the whole module",
    ('crates/engine/src', 'pipeline::work', 'pipeline'):
        "the pass's types (the plugin set, a setter, its report and errors): work.rs runs them, mod.rs defines them",
    ('crates/engine/src', 'plugin_dir::driver', 'plugin_dir'): "the directory's listener, refusal and event types",
    ('crates/engine/src', 'plugin_dir::state', 'plugin_dir'): "the reload event type",
    ('crates/engine/src', 'plugin_dir::load', 'plugin_dir'): "the refusal type",
    ('crates/model/src', 'node::part', 'node'): "the field path type",
    ('crates/model/src', 'node::conditions', 'node'): "the field path type",
    ('crates/model/src', 'node::diff', 'node'): "the field path type",
    ('crates/model/src', 'node::path', 'node'): "the module's error type",
    ('crates/model/src', 'validate::checker', 'validate'): "the validation's error types and limits",
    ('crates/registry/src', 'client::session', 'client'): "the client type and the manifest size limit",
    ('crates/registry/src', 'keyless::cert', 'keyless'): "the module's error and key types",
    ('crates/registry/src', 'keyless::root', 'keyless'): "the module's error and key types",
    ('crates/registry/src', 'keyless::tlog', 'keyless'): "the module's error and key types",
    ('crates/registry/src', 'policy::evidence', 'policy'): "GitHub Actions' issuer, a constant of the policy",
    ('crates/registry/src', 'policy::rule', 'policy'): "the policy's error type",
    ('crates/runtime/src', 'plugin::code', 'plugin'): "the plugin's interface, load error and the reactor export's name",
    ('crates/runtime/src', 'plugin::errors', 'plugin'): "the plugin file's size limit",
    ('crates/runtime/src', 'plugin::settings', 'plugin'): "the default memory limit and timeout",
}


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
    with open(path, encoding='utf-8') as f:
        text = '\n'.join(line.split('//')[0] for line in f)
    return re.split(r'#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod \w+\s*\{', text)[0]


def use_paths(tree, prefix=''):
    """The paths of a use tree: `super::{a::{B, C}, d as e, self}` gives
    super::a::B, super::a::C, super::d and super."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(tree):
        if ch == '{':
            depth += 1
        elif ch == '}':
            depth -= 1
        elif ch == ',' and depth == 0:
            items.append(tree[start:i])
            start = i + 1
    items.append(tree[start:])
    out = []
    join = lambda a, b: f'{a}::{b}' if a and b else a or b
    for item in (i.strip() for i in items):
        if not item:
            continue
        if '{' in item:
            head, _, rest = item.partition('{')
            out += use_paths(rest[:rest.rfind('}')], join(prefix, head.strip().rstrip(':')))
        else:
            name = re.split(r'\s+as\s+', item)[0].strip()
            out.append(prefix if name == 'self' else join(prefix, name))
    return out


def resolve(files, cur, path):
    """The module `path` leads into, from module `cur`, or None."""
    found = resolve_name(files, cur, path)
    return found and found[0]


def resolve_name(files, cur, path):
    """(module, name): the module `path` leads into and the item it names
    there (`super::Error::invalid` names `Error`; a path that ends at the
    module names `*`), or None."""
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
            return m, (parts[n] if n < len(parts) else '*')
    return None


def imports(files):
    """{module: {target: set of the names it names there}}."""
    out = {m: {} for m in files}
    for m, p in files.items():
        c = code(p)
        children = set(re.findall(r'^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(' + IDENT + r')\s*;', c, re.M))
        found = []
        use = r'(?<![\w:])(pub(?:\([^)]*\))?\s+)?use\s+([^;]*);'
        for u in re.finditer(use, c):
            found += [(path, bool(u.group(1))) for path in use_paths(u.group(2))]
        c = re.sub(use, ' ', c)  # the paths in code, below: not these again
        for x in re.finditer(r'(?<![:\w])((?:crate|super|self)(?:::(?:' + IDENT + r'|\*))+)', c):
            found.append((x.group(1), False))
        for child in children:
            for x in re.finditer(r'(?<![:\w])(' + child + r'(?:::' + IDENT + r')+)', c):
                found.append((x.group(1), False))
        for path, reexport in found:
            if path.split('::')[0] in children:
                path = 'self::' + path
            found_name = resolve_name(files, m, path)
            if not found_name or found_name[0] == m:
                continue
            t, name = found_name
            if reexport and t.startswith(m + '::' if m else ''):
                continue  # a parent's re-export of its descendant
            out[m].setdefault(t, set()).add(name)
    return out


def types_only(names):
    return all(n[:1].isupper() for n in names)


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


def check(root, name, allow):
    """The problems of one crate, as lines; `name` keys ALLOW."""
    files = modules(root)
    imp = imports(files)
    problems, used = [], set()
    graph = {m: set() for m in files}
    for m, targets in imp.items():
        for t, names in targets.items():
            if not t:
                continue  # the crate root
            key = (name, m, t)
            if key in allow and m.startswith(t + '::'):
                used.add(key)
                if types_only(names):
                    continue
                problems.append(
                    f'{name}: {m} -> {t} is allowed for types only ({allow[key]}), '
                    f'but names {", ".join(sorted(n for n in names if not n[:1].isupper()))}')
            graph[m].add(t)
    for comp in circles(graph):
        ties = []
        for m in comp:
            for t in sorted(graph[m] & set(comp)):
                if m.startswith(t + '::') or t.startswith(m + '::'):
                    ties.append(f'{m} -> {t}: {", ".join(sorted(imp[m][t]))}')
        line = f'{name}: a circle of imports: {" -> ".join(comp)}'
        if ties:
            line += '\n    between a parent and its child: ' + '; '.join(ties)
        problems.append(line)
    return problems, used


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    roots = sys.argv[1:] or sorted(
        os.path.join(repo, d, 'src')
        for d in ['host'] + ['crates/' + c for c in os.listdir(os.path.join(repo, 'crates'))]
        if os.path.isdir(os.path.join(repo, d, 'src')))
    problems, used = [], set()
    for root in roots:
        p, u = check(root, os.path.relpath(root, repo), ALLOW)
        problems += p
        used |= u
    if not sys.argv[1:]:
        problems += [f'{k[0]}: ALLOW names {k[1]} -> {k[2]}, which no longer imports it: remove the entry'
                     for k in sorted(set(ALLOW) - used)]
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())

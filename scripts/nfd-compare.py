#!/usr/bin/env python3
"""The label-for-label comparison with nfd-worker (scripts/bench-nfd.sh).

  nfd-compare.py nfd-log LOG          nfd-worker's labels, from its -v=1 log,
                                      as nfd-master writes them on the node
  nfd-compare.py node NODE_JSON       the NFD labels of a Node (nodestatus once)
  nfd-compare.py diff NFD NS REASONS  every difference of two label files,
                                      each with its reason
  nfd-compare.py table DIR [--write FILE | --check FILE]
                                      the summary table of DIR's results,
                                      between the markers in FILE

A label file holds `name=value` lines, sorted. REASONS is a TSV of
`kind<TAB>name pattern (fnmatch)<TAB>reason`; kind is `only-nfd`,
`only-nodestatus` or `value`. A difference that no line explains says
"no reason known".
"""
import fnmatch
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doc_markers import splice  # noqa: E402

BEGIN, END = "<!-- nfd-compare:begin -->", "<!-- nfd-compare:end -->"
NO_REASON = "no reason known"


class Error(Exception):
    pass


def read(path):
    with open(path) as f:
        return f.read()


def nfd_log_labels(text):
    """The labels of nfd-worker's "feature discovery completed" line: klog
    writes a multi-line value as `labels=<` then one tab-indented YAML line
    each, then `>`."""
    start = text.rfind('"feature discovery completed" labels=<')
    if start < 0:
        raise Error("no 'feature discovery completed' line with labels (was nfd-worker run with -v=1?)")
    labels = {}
    for line in text[start:].splitlines()[1:]:
        if line.strip() == ">":
            return labels
        if not line.startswith("\t"):
            raise Error(f"unexpected line in the labels dump: {line!r}")
        body = line[1:]
        if body.strip() in ("{}", ""):
            continue
        m = re.match(r"^(\S+): (.*)$", body)
        if not m:
            raise Error(f"not a label in the labels dump: {body!r}")
        labels[m.group(1)] = unquote(m.group(2))
    raise Error("the labels dump has no end ('>')")


FEATURE_LABEL_NS = "feature.node.kubernetes.io"


def as_nfd_master_writes(labels):
    """The worker's labels as nfd-master writes them on the node with its
    default feature gates: an unprefixed name gets the
    `feature.node.kubernetes.io/` prefix (DisableAutoPrefix off; the
    master's addNsToMapKeys, where a name already prefixed wins). The
    master's namespace denials are not modelled: the bench's input has no
    name they would deny."""
    out = {k: v for k, v in labels.items() if "/" in k}
    for k, v in labels.items():
        if "/" not in k:
            out.setdefault(f"{FEATURE_LABEL_NS}/{k}", v)
    return out


def unquote(v):
    """A YAML scalar as Go's yaml.Marshal writes a string."""
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] == '"':
        return json.loads(v)
    if len(v) >= 2 and v[0] == v[-1] == "'":
        return v[1:-1].replace("''", "'")
    return v


# The labels of the kubelet's initial node (kubernetes.io/hostname, os,
# arch, ...), which `nodestatus once` starts from; every other label on its
# result is the features setter's.
KUBELET_NAMESPACES = ("kubernetes.io", "beta.kubernetes.io", "node.kubernetes.io")


def node_labels(node):
    """A Node's labels less the kubelet's own."""
    labels = node.get("metadata", {}).get("labels", {}) or {}
    return {k: v for k, v in labels.items() if "/" in k and k.split("/", 1)[0] not in KUBELET_NAMESPACES}


def write_labels(labels):
    return "".join(f"{k}={v}\n" for k, v in sorted(labels.items()))


def read_labels(path):
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            if "=" not in line:
                raise Error(f"{path}:{n}: not name=value: {line!r}")
            k, v = line.split("=", 1)
            out[k] = v
    return out


def read_reasons(path):
    rules = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[0] not in ("only-nfd", "only-nodestatus", "value"):
                raise Error(f"{path}:{n}: want kind<TAB>pattern<TAB>reason, kind one of only-nfd, only-nodestatus, value")
            rules.append(tuple(parts))
    return rules


def diff(nfd, ns, rules):
    """Rows (kind, name, nfd value, nodestatus value, reason), sorted."""
    rows = []
    for name in sorted(set(nfd) | set(ns)):
        if name in nfd and name in ns:
            if nfd[name] == ns[name]:
                continue
            kind = "value"
        else:
            kind = "only-nfd" if name in nfd else "only-nodestatus"
        reason = next((r for k, p, r in rules if k == kind and fnmatch.fnmatchcase(name, p)), NO_REASON)
        rows.append((kind, name, nfd.get(name, ""), ns.get(name, ""), reason))
    return rows


def read_tsv(path):
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def table(d):
    meta = dict(read_tsv(os.path.join(d, "meta.tsv")))
    cases = sorted(n[: -len(".diff.tsv")] for n in os.listdir(d) if n.endswith(".diff.tsv"))
    if not cases:
        raise Error(f"no CASE.diff.tsv in {d}")
    lines = [
        f"Last run {meta.get('date', '?')}: nodestatus `{meta.get('nodestatus', '?')}`, "
        f"nfd-worker {meta.get('nfd-worker', '?')}, kernel {meta.get('kernel', '?')}, "
        f"load {meta.get('load', '?')} (`scripts/bench-nfd.sh`; raw results in "
        f"`{d.rstrip('/')}/`).",
        "",
        "| case | nfd-worker's labels | the same from nodestatus | differences | of which no reason known |",
        "|---|---|---|---|---|",
    ]
    details = []
    for case in cases:
        nfd = read_labels(os.path.join(d, f"{case}.nfd.txt"))
        ns = read_labels(os.path.join(d, f"{case}.nodestatus.txt"))
        rows = [r for r in read_tsv(os.path.join(d, f"{case}.diff.tsv")) if r[0] != "kind"]
        same = sum(1 for k, v in nfd.items() if ns.get(k) == v)
        unknown = sum(1 for r in rows if r[4] == NO_REASON)
        lines.append(f"| {case} | {len(nfd)} | {same} | {len(rows)} | {unknown} |")
        details += detail_rows(case, rows)
    if details:
        lines += ["", "| case | difference | label | nfd-worker | nodestatus | why |", "|---|---|---|---|---|---|"] + details
    return "\n".join(lines) + "\n"


def detail_rows(case, rows, most=3):
    """A row per difference; more than `most` of one kind and reason are
    one row, which names the first two and counts the rest (the TSV has
    them all)."""
    groups = {}
    for kind, name, a, b, reason in rows:
        groups.setdefault((kind, reason), []).append((name, a, b))
    out = []
    for (kind, reason), items in groups.items():
        if len(items) > most:
            names = ", ".join(f"`{n}`" for n, _, _ in items[:2])
            out.append(f"| {case} | {kind} | {names} and {len(items) - 2} more ({case}.diff.tsv) | | | {reason} |")
            continue
        for name, a, b in items:
            out.append(f"| {case} | {kind} | `{name}` | {('`' + a + '`') if a else ''} | {('`' + b + '`') if b else ''} | {reason} |")
    return out


def main(argv):
    if len(argv) < 2:
        raise Error(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "nfd-log" and len(args) == 1:
        sys.stdout.write(write_labels(as_nfd_master_writes(nfd_log_labels(read(args[0])))))
    elif cmd == "node" and len(args) == 1:
        sys.stdout.write(write_labels(node_labels(json.loads(read(args[0])))))
    elif cmd == "diff" and len(args) == 3:
        rows = diff(read_labels(args[0]), read_labels(args[1]), read_reasons(args[2]))
        sys.stdout.write("kind\tlabel\tnfd-worker\tnodestatus\treason\n")
        sys.stdout.write("".join("\t".join(r) + "\n" for r in rows))
    elif cmd == "table" and len(args) == 3 and args[1] in ("--write", "--check"):
        body = table(args[0])
        doc = read(args[2])
        new = splice(doc, BEGIN, END, body, args[2], error=Error)
        if args[1] == "--check":
            if new != doc:
                raise Error(f"{args[2]}'s comparison table is not what {args[0]} gives: run scripts/nfd-compare.py table {args[0]} --write {args[2]}")
        elif new != doc:
            with open(args[2], "w") as f:
                f.write(new)
    else:
        raise Error(__doc__)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Error as e:
        print(f"nfd-compare.py: {e}", file=sys.stderr)
        sys.exit(1)

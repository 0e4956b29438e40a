#!/usr/bin/env python3
"""The table of the default pass, every setter called and incremental, in
docs/benchmarks.md, from the newest raw result of scripts/bench-passes.sh.

    passes-figures.py collect --log LOG --criterion DIR --date D --commit C --load "A B"
        prints the raw result (JSON) of one run
    passes-figures.py write [--check]
        writes (or checks) the table between the markers of docs/benchmarks.md
"""

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_markers import splice  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "passes"
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN = "<!-- passes-bench:begin (scripts/passes-figures.py writes this table) -->"
END = "<!-- passes-bench:end -->"
GROUP = "pass/default/"
ROWS = [
    ("wasm", "every setter called, over the input node"),
    ("wasm-steady", "every setter called, over the steady node (the kubelet's way)"),
    ("wasm-fresh", "every setter called, a fresh instance per call"),
    ("wasm-incremental", "the steady node with its memo (`incrementalPasses: on`)"),
    ("native", "the setters compiled natively, every one run"),
    ("host", "the host's work around the calls"),
    ("host-steady", "the host's work, steady node"),
]


class Error(Exception):
    pass


def medians(criterion):
    out = {}
    for est in sorted(Path(criterion).glob("**/new/estimates.json")):
        full = json.loads((est.parent / "benchmark.json").read_text())["full_id"]
        if full.startswith(GROUP):
            out[full[len(GROUP):]] = json.loads(est.read_text())["median"]["point_estimate"]
    return out


def called(log_text):
    m = re.findall(r"^incremental: called \[(.*)\]$", log_text, re.M)
    if not m:
        raise Error("the bench's log has no 'incremental: called [...]' line")
    return [s.strip().strip('"') for s in m[-1].split(",") if s.strip()]


def collect(args):
    m = medians(args.criterion)
    missing = [r for r, _ in ROWS if r not in m]
    if missing:
        raise Error(f"no median for {', '.join(GROUP + r for r in missing)} under {args.criterion}")
    load = args.load.split()
    return {
        "date": args.date,
        "commit": args.commit,
        "load": {"before": float(load[0]), "after": float(load[1])},
        "medians_ns": m,
        "incremental_called": called(Path(args.log).read_text()),
    }


def newest():
    files = sorted(RESULTS.glob("*.json"))
    if not files:
        raise Error(f"no raw result in {RESULTS}")
    return files[-1], json.loads(files[-1].read_text())


def fmt(ns):
    return f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.0f} µs"


def table(path, r):
    m = r["medians_ns"]
    native = m["native"]
    lines = [
        f"Run {r['date']} (commit `{r['commit']}`, load {r['load']['before']:.2f} before and "
        f"{r['load']['after']:.2f} after; raw result `{path.relative_to(ROOT)}`, written by "
        "`scripts/bench-passes.sh`):",
        "",
        "| `pass/default/...` | what | median | against `native` |",
        "|---|---|---:|---:|",
    ]
    for row, what in ROWS:
        lines.append(f"| `{row}` | {what} | {fmt(m[row])} | {m[row] / native:.2f}x |")
    calls = r["incremental_called"]
    said = (
        "The settled incremental pass called "
        + ", ".join(f"`{c}`" for c in calls)
        + " on this machine (each read something that moved between passes); every other setter's part stood."
        if calls
        else "The settled incremental pass called no setter on this machine: nothing any of them read moved "
        "between two passes (a pass that finds `/proc/meminfo` or a `statvfs` moved calls the setters that "
        "read it, and the median counts those passes too)."
    )
    lines += ["", said]
    return "\n".join(lines) + "\n"


def main(argv):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    for a in ("--log", "--criterion", "--date", "--commit", "--load"):
        c.add_argument(a, required=True)
    w = sub.add_parser("write")
    w.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    try:
        if args.cmd == "collect":
            print(json.dumps(collect(args), indent=2, sort_keys=True))
            return 0
        path, r = newest()
        doc = DOC.read_text()
        new = splice(doc, BEGIN, END, table(path, r), "docs/benchmarks.md", error=Error)
        if args.check:
            if new != doc:
                raise Error("docs/benchmarks.md's pass table is not what bench/passes gives: run scripts/passes-figures.py write")
            return 0
        DOC.write_text(new)
        return 0
    except Error as e:
        print(f"passes-figures: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

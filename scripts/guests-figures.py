#!/usr/bin/env python3
"""The figures of the setters in other languages (scripts/bench-guests.sh).

  guests-figures.py collect --log LOG --criterion DIR --components DIR
                            --date D --commit C --load "BEFORE AFTER"
      the raw result of one run, as JSON on stdout: criterion's medians of
      guest/<name>/* and activate/<name>/cached, the once-per-run lines
      of the bench's output, and each component's size
  guests-figures.py write [--check] [--results DIR]
      the tables of README.md and docs/benchmarks.md, between their
      `<!-- guests-bench:begin -->` and `<!-- guests-bench:end -->`
      markers, from the newest result in DIR (default bench/guests);
      --check fails when a file is not what the result gives
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doc_markers import splice  # noqa: E402

BEGIN, END = "<!-- guests-bench:begin -->", "<!-- guests-bench:end -->"
# The guests, in the tables' order: the bench's name, its language and how
# it is written.
GUESTS = [
    ("cpu-features", "Python (componentize-py)"),
    ("load-average", "JavaScript (componentize-js)"),
    ("load-average-aot", "JavaScript, ahead of time (weval)"),
    ("local-disks", "Go, the SDK's types"),
    ("k8s-types", "Go, k8s.io/api's v1.Node"),
]
ONCE = re.compile(
    r"^activate/(?P<name>[\w-]+)/(?P<what>watched|cold-\w+) \(once\): (?P<value>[0-9.]+) (?P<unit>ms|s) "
)


class Error(Exception):
    pass


def read(path):
    with open(path) as f:
        return f.read()


def once_lines(text):
    """{name: {what: seconds}} from the bench's printed once-per-run lines."""
    out = {}
    for line in text.splitlines():
        m = ONCE.match(line.strip())
        if m:
            v = float(m["value"]) / (1e3 if m["unit"] == "ms" else 1)
            out.setdefault(m["name"], {})[m["what"]] = v
    return out


def medians(criterion):
    """{full_id: seconds} of criterion's guest/ and activate/ results."""
    out = {}
    # Criterion names a group's directory with its `/` as `_`.
    groups = sorted(d for d in (os.listdir(criterion) if os.path.isdir(criterion) else [])
                    if d.startswith(("guest_", "activate_")))
    for group in groups:
        for dirpath, _, files in os.walk(os.path.join(criterion, group)):
            if os.path.basename(dirpath) == "new" and "estimates.json" in files:
                bench = json.loads(read(os.path.join(dirpath, "benchmark.json")))["full_id"]
                est = json.loads(read(os.path.join(dirpath, "estimates.json")))
                out[bench] = est["median"]["point_estimate"] / 1e9
    return out


def collect(args):
    sizes = {}
    for name, _ in GUESTS:
        base = name[: -len("-aot")] if name.endswith("-aot") else name
        path = os.path.join(args.components, "aot" if name.endswith("-aot") else "", f"{base}.wasm")
        if os.path.isfile(path):
            sizes[name] = os.path.getsize(path)
    med = medians(args.criterion)
    if not med:
        raise Error(f"no criterion results under {args.criterion}/guest_* or activate_*")
    return {
        "date": args.date,
        "commit": args.commit,
        "load": args.load,
        "medians_s": med,
        "once_s": once_lines(read(args.log)),
        "component_bytes": sizes,
    }


def newest(results):
    files = sorted(f for f in os.listdir(results) if f.endswith(".json"))
    if not files:
        raise Error(f"no result in {results}: run scripts/bench-guests.sh")
    return os.path.join(results, files[-1]), json.loads(read(os.path.join(results, files[-1])))


def ms(v):
    if v is None:
        return "not measured"
    return f"{v * 1e3:.2f} ms" if v < 1 else f"{v:.2f} s"


def mb(n):
    return "not built" if n is None else f"{n / 1e6:.1f} MB"


def table(path, r):
    med, once, sizes = r["medians_s"], r["once_s"], r["component_bytes"]
    lines = [
        f"One release run, {r['date']}, commit `{r['commit']}`, load {r['load']} (before and after; "
        f"`scripts/bench-guests.sh`, raw result `{path}`). Each guest on the ~15 kB busy node, granted `/proc` and `/sys`.",
        "",
        "| setter | language | component | `set`, fresh instance | `set`, kept instance | `set`, Winch's code | activation, cached | first `set` after a cold compile: Cranelift / tiered (once) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, lang in GUESTS:
        if not any(k.startswith(f"guest/{name}/") for k in med):
            continue
        o = once.get(name, {})
        lines.append(
            f"| `{name}` | {lang} | {mb(sizes.get(name))} | {ms(med.get(f'guest/{name}/set'))} | "
            f"**{ms(med.get(f'guest/{name}/set-reuse'))}** | {ms(med.get(f'guest/{name}/set-winch'))} | "
            f"{ms(med.get(f'activate/{name}/cached'))} | {ms(o.get('cold-cranelift'))} / {ms(o.get('cold-tiered'))} |"
        )
    return "\n".join(lines) + "\n"


def write(args):
    path, r = newest(args.results)
    body = table(path, r)
    stale = []
    for doc_path in ("README.md", "docs/benchmarks.md"):
        doc = read(doc_path)
        new = splice(doc, BEGIN, END, body, doc_path, error=Error)
        if new == doc:
            continue
        if args.check:
            stale.append(doc_path)
        else:
            with open(doc_path, "w") as f:
                f.write(new)
    if stale:
        raise Error(f"{', '.join(stale)}: the guests' table is not what {path} gives: run scripts/guests-figures.py write")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    for a in ("--log", "--criterion", "--components", "--date", "--commit", "--load"):
        c.add_argument(a, required=True)
    w = sub.add_parser("write")
    w.add_argument("--check", action="store_true")
    w.add_argument("--results", default="bench/guests")
    args = p.parse_args(argv[1:])
    if args.cmd == "collect":
        json.dump(collect(args), sys.stdout, indent=1, sort_keys=True)
        print()
    else:
        write(args)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Error as e:
        print(f"guests-figures.py: {e}", file=sys.stderr)
        sys.exit(1)

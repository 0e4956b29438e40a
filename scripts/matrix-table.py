#!/usr/bin/env python3
"""Writes README.md's Kubernetes version table from docs/matrix/results.tsv
(what scripts/test-matrix.sh appends): for each release of the matrix, the
latest result of each suite, with its date, commit and load.

    scripts/matrix-table.py            rewrites the table in README.md
    scripts/matrix-table.py --check    fails when README.md's table is not
                                       what the results give

The table sits between the lines `<!-- matrix:begin -->` and
`<!-- matrix:end -->`; nothing else of README.md is touched.
"""

import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doc_markers import splice  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "matrix", "results.tsv")
README = os.path.join(ROOT, "README.md")
BEGIN = "<!-- matrix:begin -->"
END = "<!-- matrix:end -->"

# Newest first, as users read a version table. Keep in step with
# scripts/test-matrix.sh's all_releases.
RELEASES = ["1.38.0-beta.0", "1.37.2", "1.36.3", "1.35.4", "1.34.4", "1.33.13", "1.32.13"]
SUITES = [("api", "real apiserver"), ("faults", "fault rig"), ("realnode", "real node (its kubelet)")]
COLUMNS = ["release", "suite", "result", "passed", "failed", "seconds", "date", "commit", "load", "note"]


class Error(Exception):
    pass


def read_results(path):
    """The latest row of each (release, suite), in file order."""
    latest = {}
    if not os.path.exists(path):
        return latest
    with open(path, newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    if not rows or rows[0] != COLUMNS:
        raise Error(f"{path}: the first line must be the header {COLUMNS}")
    for n, row in enumerate(rows[1:], start=2):
        if len(row) != len(COLUMNS):
            raise Error(f"{path}:{n}: {len(row)} fields, want {len(COLUMNS)}")
        r = dict(zip(COLUMNS, row))
        if r["release"] not in RELEASES:
            raise Error(f"{path}:{n}: release {r['release']!r} is not in the matrix")
        if r["suite"] not in dict(SUITES):
            raise Error(f"{path}:{n}: unknown suite {r['suite']!r}")
        if r["result"] not in ("passed", "failed", "skipped"):
            raise Error(f"{path}:{n}: result {r['result']!r} (passed, failed or skipped)")
        latest[(r["release"], r["suite"])] = r
    return latest


def cell(r):
    if r is None:
        return "not run"
    passed, failed = int(r["passed"]), int(r["failed"])
    tests = lambda n: f"{n} test" + ("" if n == 1 else "s")
    if r["result"] == "passed":
        text = f"passed ({tests(passed)})"
    elif r["result"] == "failed":
        text = f"**failed**: {failed} of {tests(passed + failed)}"
    else:
        text = "skipped"
    if r["note"] and r["result"] != "passed":
        note = r["note"].replace("|", "\\|")
        text += f" ({note})"
    return text


def table(latest):
    head = "| Kubernetes | " + " | ".join(name for _, name in SUITES) + " | last run (UTC, commit, load) |"
    lines = [head, "|" + "---|" * (len(SUITES) + 2)]
    for release in RELEASES:
        rows = [latest.get((release, s)) for s, _ in SUITES]
        ran = [r for r in rows if r is not None]
        if ran:
            last = max(ran, key=lambda r: r["date"])
            when = f"{last['date']}, `{last['commit']}`, load {last['load']}"
            # Suites run at another commit say which.
            others = {}
            for (s, _), r in zip(SUITES, rows):
                if r is not None and r["commit"] != last["commit"]:
                    others.setdefault(r["commit"], []).append(s)
            for commit, names in sorted(others.items()):
                when += f"; {', '.join(names)} at `{commit}`"
        else:
            when = "never"
        lines.append(f"| {release} | " + " | ".join(cell(r) for r in rows) + f" | {when} |")
    return "\n".join(lines) + "\n"


def render(readme_text, latest):
    return splice(readme_text, BEGIN, END, table(latest), "README.md", error=Error)


def main(argv):
    check = "--check" in argv[1:]
    try:
        latest = read_results(RESULTS)
        with open(README) as f:
            old = f.read()
        new = render(old, latest)
    except Error as e:
        print(f"matrix-table: {e}", file=sys.stderr)
        return 1
    if check:
        if new != old:
            print(
                "matrix-table: README.md's version table is not what docs/matrix/results.tsv gives;"
                " run scripts/matrix-table.py",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != old:
        with open(README, "w") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

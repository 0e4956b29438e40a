#!/usr/bin/env python3
"""Writes the "Reacting plugins" table of docs/benchmarks.md from the newest
raw result in bench/events/ (made by scripts/bench-events.sh), between the
markers <!-- events-bench:begin --> and <!-- events-bench:end -->."""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doc_markers import MarkerError, splice  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
runs = sorted(glob.glob(os.path.join(root, "bench/events/*.json")))
if not runs:
    sys.exit("no result in bench/events/: run scripts/bench-events.sh")
r = json.load(open(runs[-1]))
lat, flood, matched = r["latency"], r["flood"], r["matched"]


def ms(s):
    return f"{s * 1000:.0f} ms"


rows = [
    ("kernel message to the node's condition, p50 / p99 / max",
     f"{ms(lat['to_node_p50_s'])} / {ms(lat['to_node_p99_s'])} / {ms(lat['to_node_max_s'])} ({lat['to_node_seen']} of {lat['messages']} seen)",
     "p99 ≤ 1 s", lat["to_node_p99_s"] <= 1.0 and lat["to_node_seen"] == lat["messages"]),
    ("kernel message to its Event, p50 / p99 / max",
     f"{ms(lat['to_event_p50_s'])} / {ms(lat['to_event_p99_s'])} / {ms(lat['to_event_max_s'])} ({lat['to_event_seen']} of {lat['messages']} seen)",
     "p99 ≤ 1 s", lat["to_event_p99_s"] <= 1.0 and lat["to_event_seen"] == lat["messages"]),
    ("flood: 10,000 unmatched lines/s, engine CPU (process less the writer)",
     f"{flood['engine_core_share'] * 100:.1f} % of a core ({flood['engine_cpu_s']:.2f} CPU-s in {flood['seconds']:.0f} s; the stream reader {flood['reader_cpu_s']:.2f} CPU-s; {flood['lines_written']} lines)",
     "≤ 2 % of a core", 0 <= flood["engine_core_share"] <= 0.02),
    ("flood: matched lines among them handed",
     f"{flood['matched_handed']} of {flood['matched_written']}",
     "all", flood["matched_handed"] >= flood["matched_written"]),
    ("1,000 matched lines/s for 60 s: queued / dropped / handed",
     f"{matched['queued']} / {matched['dropped']} / {matched['handed']} of {matched['lines_written']}",
     "drops counted", True),
    ("1,000 matched lines/s: RSS first / max",
     f"{matched['rss_mb_first']:.1f} / {matched['rss_mb_max']:.1f} MB",
     "bounded (queue ≤ 4,096 matches, 8 MiB)", matched["rss_mb_max"] - matched["rss_mb_first"] < 64),
    ("1,000 matched lines/s: status patches, total / most in one second",
     f"{matched['patches']} in {matched['seconds']:.0f} s / {matched['patches_per_s_max']}",
     "at most about one a second", matched["patches"] <= matched["seconds"] * 1.2 + 3),
]
lines = [
    f"One run of `scripts/bench-events.sh` ({r['profile']} build), {r['date']}, commit {r['commit']}, load {r['load']}; raw result `{os.path.relpath(runs[-1], root)}`.",
    "",
    "| figure | measured | goal | met |",
    "|---|---|---|---|",
]
for name, value, goal, met in rows:
    lines.append(f"| {name} | {value} | {goal} | {'yes' if met else 'no'} |")
if flood["engine_core_share"] < 0:
    sys.exit("the flood's engine CPU is negative: the measurement is wrong, not the engine fast; nothing written")
table = "\n".join(lines)
doc = os.path.join(root, "docs/benchmarks.md")
text = open(doc).read()
begin, end = "<!-- events-bench:begin -->", "<!-- events-bench:end -->"
if begin not in text:
    text = text.rstrip("\n") + f"\n\n## Reacting plugins: the kernel log to the node\n\n{begin}\n{end}\n"
try:
    text = splice(text, begin, end, table, "docs/benchmarks.md")
except MarkerError as e:
    sys.exit(str(e))
with open(doc, "w") as f:
    f.write(text)
print(table)

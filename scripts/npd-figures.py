#!/usr/bin/env python3
"""Writes the "Side by side with node-problem-detector" table of
docs/benchmarks.md from the newest raw result in bench/npd/ (made by
scripts/bench-npd.sh), between the markers <!-- npd-bench:begin --> and
<!-- npd-bench:end -->, and lists every difference between the conditions
and events the two tools made of the same lines, each with its reason.

    scripts/npd-figures.py [RESULT.json]
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doc_markers import splice  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- npd-bench:begin -->", "<!-- npd-bench:end -->"
SECTION = "## Side by side with node-problem-detector (issue 43, item 8)"
AFTER = "## Reacting plugins"
COMBINED = "(combined from similar events): "
# client-go's event recorder, which NPD uses with its defaults
# (tools/record/events_cache.go): a token bucket per source and object
# and type, and the aggregation of similar events.
SPAM_BURST = 25
AGGREGATE_AFTER = 10

SECTION_INTRO = """`scripts/bench-npd.sh` (root) runs node-problem-detector, built from its
repository, with its published `config/kernel-monitor.json` unchanged, and
nodestatus with `plugins/log-rules` reading that same file, on this
machine, against one real kube-apiserver (nodestatus run's embedded
cluster), each on a node of its own (on one node both would write the same
condition types and neither's figure could be told apart). It writes the
same lines to the real `/dev/kmsg`: one per rule of the config (compared
below), then TaskHung lines 0.5 to 1.5 s apart (the latency to the Event),
then a flood of unmatched lines (CPU as utime+stime of `/proc/PID/stat`,
RSS as VmRSS every second). A permanent rule turns its condition True
once in a run (neither tool rewrites a True condition for the same reason,
and NPD has no way back), so the latency to the condition is one sample
per permanent rule, not 100. `scripts/npd-figures.py` writes what follows
from the newest raw result in `bench/npd/` (the tools' logs beside it)."""


class Error(Exception):
    """A raw result this script cannot read."""


def load(path):
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise Error(f"{path}: {e}") from e
    for key in ["date", "load_start", "nodestatus", "npd", "idle", "compare", "latency", "flood", "after_flood", "conditions_final"]:
        if key not in r:
            raise Error(f"{path}: no {key!r}: not a result of scripts/bench-npd.py")
    return r


def ms(s):
    return "—" if s is None else f"{s * 1000:.0f} ms"


def events_sent(r, tool):
    """Warning events the tool sent in the compare and latency phases."""
    n = sum(len(row["tools"][tool]["events"]) for row in r["compare"])
    return n + r["latency"][tool]["seen"] + (r["after_flood"][tool] is not None)


def differences(r):
    """Every difference between NPD's and nodestatus's conditions and
    events, one line each, with its reason ("not explained" when none of
    the known ones fits)."""
    out = []
    npd_budget_spent = events_sent(r, "npd") >= SPAM_BURST
    for row in r["compare"]:
        a, b = row["tools"]["npd"], row["tools"]["nodestatus"]
        what = f"rule {row['rule']} ({row['type']} {row['reason']})"
        ea = [(e["type"], e["reason"], e["message"]) for e in a["events"]]
        eb = [(e["type"], e["reason"], e["message"]) for e in b["events"]]
        combined = [(t, rs, m[len(COMBINED):]) for t, rs, m in ea if m.startswith(COMBINED)]
        plain = [e for e in ea if not e[2].startswith(COMBINED)]
        if combined:
            out.append(
                f"{what}: NPD's event reads `{COMBINED.strip()} ...`: client-go's recorder folds the events of one reason into one after {AGGREGATE_AFTER} within 10 minutes; nodestatus records each"
            )
        ea = sorted(plain + combined)
        eb = sorted(eb)
        if ea != eb:
            missing = [e for e in eb if e not in ea]
            extra = [e for e in ea if e not in eb]
            if missing and not extra and not ea and npd_budget_spent:
                out.append(
                    f"{what}: NPD sent no event: client-go's spam filter lets {SPAM_BURST} events a node through, then one per 5 minutes, and NPD had sent {events_sent(r, 'npd')} by the end"
                )
            else:
                out.append(f"{what}: events differ, not explained: NPD {extra or 'none'}, nodestatus {missing or 'none'}")
        if row["type"] == "permanent":
            ca, cb = a.get("condition_last"), b.get("condition_last")
            if ca != cb:
                out.append(f"{what}: condition {row.get('condition', a.get('condition'))} differs, not explained: NPD {ca}, nodestatus {cb}")
    seen_npd, seen_ns, n = r["latency"]["npd"]["seen"], r["latency"]["nodestatus"]["seen"], r["latency"]["messages"]
    if seen_npd != seen_ns:
        if seen_npd < seen_ns and npd_budget_spent:
            logged = r["npd"].get("matches_logged")
            matched = f" (its log has {logged} matches, one for each rule a line of the run matched: it matched them all, and its recorder dropped the Events)" if logged is not None else ""
            out.append(
                f"latency lines: NPD's Events reached the apiserver for {seen_npd} of {n}, nodestatus's for {seen_ns}: client-go's spam filter ({SPAM_BURST} a node, then one per 5 minutes){matched}; nodestatus's budget is the plugin's `eventsPerMinute` (600 here, 10 by default)"
            )
        else:
            out.append(f"latency lines: NPD's Events seen for {seen_npd} of {n}, nodestatus's for {seen_ns}, not explained")
    after = r["after_flood"]
    if after["npd"] is None and after["nodestatus"] is not None:
        if npd_budget_spent:
            out.append(
                f"the TaskHung line after the flood: NPD sent no Event, its spam filter's {SPAM_BURST} spent; nodestatus's came {ms(after['nodestatus'])} after the line"
            )
        else:
            out.append("the TaskHung line after the flood: NPD sent no Event, not explained")
    elif after["nodestatus"] is None and after["npd"] is not None:
        out.append("the TaskHung line after the flood: nodestatus sent no Event, not explained")
    final = {t: sorted((c["type"], c["status"], c["reason"], c["message"]) for c in r["conditions_final"][t]) for t in ["npd", "nodestatus"]}
    if final["npd"] != final["nodestatus"]:
        out.append(f"conditions at the end differ, not explained: NPD {final['npd']}, nodestatus {final['nodestatus']}")
    sources = {t: sorted({e["source"] for row in r["compare"] for e in row["tools"][t]["events"]}) for t in ["npd", "nodestatus"]}
    if sources["npd"] != sources["nodestatus"]:
        out.append(
            f"every event's `source.component`: NPD writes the monitor's `source` ({', '.join(map(str, sources['npd']))}), nodestatus its own ({', '.join(map(str, sources['nodestatus']))}), as docs/events.md says"
        )
    return out


def tail_notes(r):
    """Why the slowest latencies are slow, from what the run recorded."""
    lat = r["latency"]
    notes = []
    gaps = lat.get("gap_s")
    per = lat["nodestatus"].get("per_message_s")
    if gaps and per:
        slow = sorted((x, g) for x, g in zip(per, gaps) if x is not None and g is not None)[-5:]
        if slow:
            notes.append(
                "nodestatus's five slowest Events ("
                + ", ".join(f"{ms(x)} after a gap of {g:.2f} s" for x, g in reversed(slow))
                + "): passes woken by lines are gated, two back to back and then one a second (docs/events.md), and a line that comes while a pass runs waits for the next one."
            )
    perm = [row["tools"]["npd"].get("condition_latency_s") for row in r["compare"] if row["type"] == "permanent"]
    if any(x is not None for x in perm):
        notes.append("NPD's condition manager writes the node's conditions when it looks, once a second (`updatePeriod`), and its Events at once: its condition comes up to a second after its Event.")
    return notes


def both_seen_cells(lat):
    """p50 / max of each tool over the lines both sent an Event for."""
    a, b = lat["npd"].get("per_message_s"), lat["nodestatus"].get("per_message_s")
    if not a or not b:
        return ("—", "—")
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    cells = []
    for k in (0, 1):
        v = sorted(p[k] for p in pairs)
        cells.append(f"{ms(v[(len(v) + 1) // 2 - 1])} / {ms(v[-1])} ({len(v)} lines)" if v else "—")
    return tuple(cells)


def table(r, result_path):
    lat, idle, flood, after = r["latency"], r["idle"], r["flood"], r["after_flood"]
    perm = [row for row in r["compare"] if row["type"] == "permanent"]

    def latency_cell(t):
        s = lat[t]
        return f"{ms(s['p50_s'])} / {ms(s['p99_s'])} / {ms(s['max_s'])} ({s['seen']} of {lat['messages']} seen)"

    def cond_cell(t):
        return ", ".join(f"{row['tools'][t]['condition']} {ms(row['tools'][t]['condition_latency_s'])}" for row in perm)

    def change_event_cell(t):
        cells = []
        for row in perm:
            evs = [e for e in row["tools"][t]["events"] if e["message"].startswith("Node condition") or COMBINED + "Node condition" in e["message"]]
            cells.append(f"{row['reason']} {ms(evs[0]['latency_s']) if evs else 'none'}")
        return ", ".join(cells)

    def cpu_cell(phase, t):
        p = phase[t]
        return f"{p['core_share'] * 100:.2f} % of a core ({p['cpu_s']:.2f} CPU-s in {phase['wall_s']:.0f} s)"

    def rss_cell(phase, t):
        p = phase[t]
        return f"{p['rss_mb_first']:.1f} / {p['rss_mb_max']:.1f} MB"

    agree = sum(
        1
        for row in r["compare"]
        if sorted((e["type"], e["reason"], e["message"].removeprefix(COMBINED)) for e in row["tools"]["npd"]["events"])
        == sorted((e["type"], e["reason"], e["message"]) for e in row["tools"]["nodestatus"]["events"])
        and row["tools"]["npd"].get("condition_last") == row["tools"]["nodestatus"].get("condition_last")
    )
    rows = [
        ("lines of the compare phase (one per rule) whose events and condition agree", f"{agree} of {len(r['compare'])}", "(the same)"),
        ("kernel line to its Event (TaskHung), p50 / p99 / max", latency_cell("npd"), latency_cell("nodestatus")),
        ("the same, over the lines whose Event both sent: p50 / max", *both_seen_cells(lat)),
        ("kernel line to the condition (each permanent rule, once)", cond_cell("npd"), cond_cell("nodestatus")),
        ("kernel line to the condition's change Event", change_event_cell("npd"), change_event_cell("nodestatus")),
        ("idle: CPU", cpu_cell(idle, "npd"), cpu_cell(idle, "nodestatus")),
        ("idle: RSS first / max", rss_cell(idle, "npd"), rss_cell(idle, "nodestatus")),
        (f"flood of {flood['rate']:,} unmatched lines/s ({flood['lines_written']:,} lines in {flood['seconds']:.0f} s): CPU", cpu_cell(flood, "npd"), cpu_cell(flood, "nodestatus")),
        ("flood: RSS first / max", rss_cell(flood, "npd"), rss_cell(flood, "nodestatus")),
        ("a TaskHung line 5 s after the flood, to its Event", ms(after["npd"]), ms(after["nodestatus"])),
        ("Warning events it sent of the lines above (compare, latency, after the flood)", str(events_sent(r, "npd")), str(events_sent(r, "nodestatus"))),
    ]
    ns, npd = r["nodestatus"], r["npd"]
    built = f", the newest commit before the binary was built at {ns['built']}" if ns.get("built") else ""
    head = (
        f"One run of `scripts/bench-npd.sh`, {r['date']}, load {r['load_start']} at its start and {r.get('load_end', '?')} at its end; "
        f"nodestatus {ns['commit']} ({ns['profile']} build{built}), node-problem-detector {npd['commit']} (built from its repository without journald); "
        f"raw result `{result_path}`."
    )
    lines = [head, ""]
    if ns["profile"] != "release":
        lines += [f"**The nodestatus binary was a {ns['profile']} build**: its CPU and latency are not a release build's.", ""]
    if r.get("left_in_lookback"):
        lines += [f"{len(r['left_in_lookback'])} kernel line(s) matching a rule lay within the lookback at the start: both tools read them.", ""]
    lines += ["| figure | node-problem-detector | nodestatus (log-rules) |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    for note in tail_notes(r):
        lines += ["", note]
    diffs = differences(r)
    lines += ["", "Every difference between the two in this run:" if diffs else "No difference between the two in this run.", ""]
    lines += [f"- {d}" for d in diffs]
    return "\n".join(lines).rstrip("\n")


def rewrite(text, body):
    """`text` (docs/benchmarks.md) with `body` between the markers; the
    section, with its markers, goes after the "Reacting plugins" section
    when it is not there yet."""
    if BEGIN not in text:
        block = f"{SECTION}\n\n{SECTION_INTRO}\n\n{BEGIN}\n{END}\n"
        at = text.find(AFTER)
        if at < 0:
            text = text.rstrip("\n") + "\n\n" + block
        else:
            nxt = text.find("\n## ", at + len(AFTER))
            text = text + "\n" + block if nxt < 0 else text[: nxt + 1] + block + "\n" + text[nxt + 1 :]
    return splice(text, BEGIN, END, body, "docs/benchmarks.md", error=Error)


def main(argv):
    if len(argv) > 1:
        path = argv[1]
    else:
        runs = sorted(glob.glob(os.path.join(ROOT, "bench/npd/*.json")))
        if not runs:
            raise Error("no result in bench/npd/: run scripts/bench-npd.sh")
        path = runs[-1]
    r = load(path)
    body = table(r, os.path.relpath(os.path.abspath(path), ROOT))
    doc = os.path.join(ROOT, "docs/benchmarks.md")
    with open(doc) as f:
        text = f.read()
    with open(doc, "w") as f:
        f.write(rewrite(text, body))
    print(body)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Error as e:
        sys.exit(f"npd-figures: {e}")

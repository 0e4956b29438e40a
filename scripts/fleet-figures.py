#!/usr/bin/env python3
"""The fleet tables and plots of docs/benchmarks.md from scripts/fleet-bench.sh.

Reads <dir>/<engine>-<N>/result.json (the phases and the 5 s samples of the
tests fleet::bench, engine nodestatus, and fleet_peer::bench_kwok, engine
kwok) and the audit.log beside it (every request of the engine's user, its
writes of nodes and leases with their bodies), and prints, per N, both
engines side by side:

- requests a second by phase, verb and resource, and bytes a second of the
  write bodies (the JSON the audit log holds: the object or patch sent);
- then ONE table, a row per engine and phase: the lease updates and status
  patches against the kubelet's model (a lease every 10 s, a status patch
  every report period on an idle node: the kubelet's 5 min, or the
  shortened `nodeStatusReportFrequency` result.json gives in
  how.report_seconds, so that the forced report falls in each phase), all
  requests and bytes a second, the peak
  in one second, the longest time a node's lease went unrenewed, the time
  until every lease was renewed after the outage (recovery rows), the
  engine's CPU seconds per node-minute and RSS per node (its one process;
  for kwok, the kwok process, a rollout's replaced one counted in CPU), and
  the most nodes the node lifecycle controller had not Ready at once;
- the outage's recovery: every lease fresh within, and the peak against the
  idle rate;
- the forced report: in the idle phase, the nodes that wrote their status
  with nothing changed (only heartbeats), against the model;
- the plugin rollout (an engine whose how names a rollout_condition): when
  the last node wrote the new version's condition (from the audit log's
  patch bodies), how many nodes wrote it exactly once, the registry's blob
  GETs and the simulator's pulls of each version, and in the refused phase
  the nodes that changed the condition and the most not Ready.

Writes DOCS/fleet-<N>-rate.png (nodestatus) and DOCS/fleet-kwok-<N>-rate.png:
requests a second over the run, by resource, with the phases marked.

    scripts/fleet-figures.py DIR DOCS N...
"""

import json
import sys
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

ENGINES = ["nodestatus", "kwok"]
# The user of each engine's requests, when result.json does not say.
USERS = {"nodestatus": "nodestatus-simulator", "kwok": "kwok-controller"}
PHASES = ["start", "idle", "flapping", "rollout", "refused", "outage", "recovery"]
STEADY = ["idle", "flapping", "rollout", "refused", "recovery"]
# The kubelet's nodeStatusReportFrequency, when result.json names none.
KUBELET_REPORT_SECONDS = 300


def ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def audit(path: Path, user: str):
    """The requests of `user`, each once (a watch has two entries: when its
    response started, and when it completed)."""
    out, seen = [], set()
    with open(path) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("user", {}).get("username") != user:
                continue
            if e.get("auditID") in seen:
                continue
            seen.add(e.get("auditID"))
            o = e.get("objectRef", {})
            # A request of no resource (GET /version) by its path.
            res = o.get("resource") or e.get("requestURI", "?").split("?")[0]
            if o.get("subresource"):
                res += "/" + o["subresource"]
            body = e.get("requestObject")
            # The status patches' bodies, for the rollout's and the forced
            # report's figures.
            keep = body if res == "nodes/status" and e.get("verb") == "patch" else None
            out.append({
                "at": ts(e["requestReceivedTimestamp"]),
                "verb": e.get("verb", "?"),
                "res": res,
                "name": o.get("name", ""),
                "code": e.get("responseStatus", {}).get("code", 0),
                "bytes": len(json.dumps(body, separators=(",", ":"))) if body is not None else 0,
                "body": keep,
            })
    out.sort(key=lambda r: r["at"])
    return out


def phase_rows(reqs, p):
    span = p["to"] - p["from"]
    inside = [r for r in reqs if p["from"] <= r["at"] < p["to"]]
    count, size = Counter(), Counter()
    for r in inside:
        count[(r["verb"], r["res"])] += 1
        size[(r["verb"], r["res"])] += r["bytes"]
    return span, inside, {k: (count[k] / span, size[k] / span) for k in count}


def peak(reqs, start, end, width=1.0):
    bins = Counter(int((r["at"] - start) // width) for r in reqs if start <= r["at"] < end)
    return max(bins.values()) / width if bins else 0.0


def samples_in(samples, p):
    return [s for s in samples if p["from"] <= s["at"] <= p["to"]]


def cpu_per_node_minute(samples, p, n):
    s = samples_in(samples, p)
    if len(s) < 2:
        return None
    return (s[-1]["cpu_seconds"] - s[0]["cpu_seconds"]) / (s[-1]["at"] - s[0]["at"]) * 60 / n


def renewals(reqs):
    """Per lease, the times of its successful updates and creations."""
    by = defaultdict(list)
    for r in reqs:
        if r["res"] == "leases" and r["verb"] in ("update", "create", "patch") and 0 < r["code"] < 300:
            by[r["name"]].append(r["at"])
    return by


def longest_gap(leases, p):
    """The longest a lease went unrenewed in the phase: between two
    renewals, the later one in the phase (the earlier may be before it), or
    from the last one to the phase's end."""
    worst = 0.0
    for times in leases.values():
        before = [t for t in times if t < p["from"]]
        last = before[-1] if before else None
        for t in (t for t in times if p["from"] <= t < p["to"]):
            if last is not None:
                worst = max(worst, t - last)
            last = t
        if last is not None:
            worst = max(worst, p["to"] - last)
    return worst


def condition_message(body, ctype):
    """The message a status patch writes in condition `ctype`: None when it
    leaves it as it is (a patch carries only a condition's changed fields;
    a heartbeat is its type and lastHeartbeatTime)."""
    if not body:
        return None
    for c in (body.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c.get("message")
    return None


def heartbeat_only(body):
    """Whether a status patch changes nothing but condition heartbeats: a
    report with nothing changed (the forced report)."""
    if not body or set(body) != {"status"}:
        return False
    status = body["status"]
    if set(status) - {"conditions", "$setElementOrder/conditions"}:
        return False
    return all(set(c) <= {"type", "lastHeartbeatTime"} for c in status.get("conditions") or [])


def rollout_figures(res):
    """The plugin rollout's figures (None for an engine without one)."""
    how, phases, n = res.get("how", {}), res["by_phase"], res["nodes"]
    ctype, message = how.get("rollout_condition"), how.get("rollout_message")
    if not ctype or "rollout" not in phases:
        return None
    p = phases["rollout"]
    first, carried = {}, Counter()
    for r in res["reqs"]:
        if p["from"] <= r["at"] < p["to"] and condition_message(r["body"], ctype) == message:
            first.setdefault(r["name"], r["at"])
            carried[r["name"]] += 1
    out = {
        "nodes_on_new": len(first),
        "fleet_on_new_after": (max(first.values()) - p["from"]) if len(first) >= n else None,
        "first_node_after": (min(first.values()) - p["from"]) if first else None,
        "nodes_once": sum(1 for c in carried.values() if c == 1),
        "versions": how.get("versions", []),
    }
    if "refused" in phases:
        q = phases["refused"]
        out["refused_changed"] = len({r["name"] for r in res["reqs"]
                                      if q["from"] <= r["at"] < q["to"] and condition_message(r["body"], ctype) is not None})
        out["refused_not_ready"] = max((x["not_ready"] for x in samples_in(res["samples"], q)
                                        if x["not_ready"] is not None), default=None)
    return out


def forced_reports(res, name="idle"):
    """In phase `name`: the nodes that wrote a status with nothing changed
    (heartbeats only), those writes a second, and the model's rate."""
    p = res["by_phase"].get(name)
    if p is None:
        return None
    period = res.get("how", {}).get("report_seconds", KUBELET_REPORT_SECONDS)
    span = p["to"] - p["from"]
    beats = [r for r in res["reqs"] if p["from"] <= r["at"] < p["to"] and r["res"] == "nodes/status"
             and r["verb"] == "patch" and heartbeat_only(r["body"])]
    return {"period": period, "span": span, "nodes": len({r["name"] for r in beats}),
            "rate": len(beats) / span, "model": res["nodes"] / period}


def load(root: Path, engine: str, n: int):
    path = root / f"{engine}-{n}" / "result.json"
    if not path.exists():
        return None
    res = json.loads(path.read_text())
    res.setdefault("engine", engine)
    user = res.get("user") or USERS[engine]
    res["reqs"] = audit(Path(res["audit_log"]), user)
    res["by_phase"] = {p["name"]: p for p in res["phases"]}
    return res


def summarize(res):
    n, reqs, phases, samples = res["nodes"], res["reqs"], res["by_phase"], res["samples"]
    leases = renewals(reqs)
    row = {"n": n, "engine": res["engine"]}
    for name in STEADY:
        if name not in phases:
            continue
        p = phases[name]
        span, inside, rows = phase_rows(reqs, p)
        lease = rows.get(("update", "leases"), (0, 0))[0]
        status = sum(v[0] for (verb, r), v in rows.items() if r == "nodes/status" and verb in ("patch", "update"))
        s = samples_in(samples, p)
        not_ready = max((x["not_ready"] for x in s if x["not_ready"] is not None), default=None)
        row[name] = {
            "lease": lease, "lease_ratio": lease / (n / 10), "status": status,
            "total": sum(r for r, _ in rows.values()), "bytes": sum(b for _, b in rows.values()),
            "peak": peak(inside, p["from"], p["to"]),
            "gap": longest_gap(leases, p),
            "cpu": cpu_per_node_minute(samples, p, n),
            "rss": (s[-1]["rss_bytes"] / n) if s else None,
            "not_ready": not_ready,
        }
    if "recovery" in phases:
        up = phases["recovery"]["from"]
        first = {}
        for r in reqs:
            if r["at"] >= up and r["res"] == "leases" and r["verb"] in ("update", "create", "patch") and 0 < r["code"] < 300:
                first.setdefault(r["name"], r["at"])
        row["fresh_after"] = (max(first.values()) - up) if len(first) >= n else None
        row["fresh_nodes"] = len(first)
        row["recovery_peak"] = peak(reqs, up, up + 60)
        row["recovery_peak_5s"] = peak(reqs, up, up + 60, 5.0)
    row["report_seconds"] = res.get("how", {}).get("report_seconds", KUBELET_REPORT_SECONDS)
    row["forced"] = forced_reports(res)
    row["plugin_rollout"] = rollout_figures(res)
    return row


def main():
    root, docs, sizes = Path(sys.argv[1]), Path(sys.argv[2]), [int(n) for n in sys.argv[3:]]
    summary = []
    for n in sizes:
        runs = [r for r in (load(root, e, n) for e in ENGINES) if r is not None]
        missing = [e for e in ENGINES if e not in {r["engine"] for r in runs}]
        if not runs:
            print(f"## N = {n}: not run (no {root}/<engine>-{n}/result.json)\n")
            continue
        print(f"## N = {n}\n")
        for r in runs:
            how = r.get("how", {})
            print(f"- {r['engine']}: {r['cpus']} CPUs, load at the end {r['loadavg']}; "
                  f"flapping: {how.get('flapping', '?')}; rollout: {how.get('rollout', '?')}")
        for e in missing:
            print(f"- {e}: not run")
        print()
        # Requests a second by phase, verb and resource, the engines side by side.
        per = {}
        keys = set()
        for r in runs:
            for name in PHASES:
                if name not in r["by_phase"]:
                    continue
                span, _, rows = phase_rows(r["reqs"], r["by_phase"][name])
                per[(r["engine"], name)] = rows
                keys.update((name, verb, res) for verb, res in rows)
        engines = [r["engine"] for r in runs]
        print("| phase | verb | resource | " + " | ".join(f"{e} requests/s | {e} bytes/s" for e in engines) + " |")
        print("|---|---|---|" + "---|---|" * len(engines))
        order = {p: i for i, p in enumerate(PHASES)}
        for name, verb, res in sorted(keys, key=lambda k: (order[k[0]], k[2], k[1])):
            cells = []
            for e in engines:
                rate, bps = per.get((e, name), {}).get((verb, res), (None, None))
                cells.append("-" if rate is None else f"{rate:.2f}")
                cells.append("-" if bps is None else f"{bps:.0f}")
            print(f"| {name} | {verb} | {res} | " + " | ".join(cells) + " |")
        print()
        for r in runs:
            summary.append(summarize(r))
            name = "fleet" if r["engine"] == "nodestatus" else f"fleet-{r['engine']}"
            plot(r, docs / f"{name}-{n}-rate.png")
    print("| N | engine | phase | lease updates/s (x kubelet N/10) | status writes/s (model N/report period) | all requests/s | bytes/s | peak/s | longest lease gap | every lease fresh after the outage | CPU s per node-minute | RSS per node | most not Ready |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in summary:
        for name in STEADY:
            if name not in row:
                continue
            p = row[name]
            cpu = f"{p['cpu']:.4f}" if p["cpu"] is not None else "-"
            rss = f"{p['rss'] / 1e6:.2f} MB" if p["rss"] is not None else "-"
            fresh = "-"
            if name == "recovery" and "fresh_nodes" in row:
                fresh = f"{row['fresh_after']:.1f} s" if row["fresh_after"] is not None else f"not all ({row['fresh_nodes']} of {row['n']})"
            model = row["n"] / row["report_seconds"] if row["engine"] == "nodestatus" else None
            status = f"{p['status']:.3f}" + (f" ({model:.3f})" if model is not None else "")
            print(f"| {row['n']} | {row['engine']} | {name} | {p['lease']:.2f} ({p['lease_ratio']:.3f}x) | {status} | {p['total']:.2f} | {p['bytes']:.0f} | {p['peak']:.0f} | {p['gap']:.1f} s | {fresh} | {cpu} | {rss} | {p['not_ready']} |")
    print()
    for row in summary:
        if "fresh_nodes" in row:
            fresh = f"{row['fresh_after']:.1f} s" if row["fresh_after"] is not None else f"not all ({row['fresh_nodes']} of {row['n']})"
            steady = row["idle"]["total"] if "idle" in row else float("nan")
            print(f"- N = {row['n']}, {row['engine']}: after the 60 s outage every lease fresh within {fresh}; peak {row['recovery_peak']:.0f} requests/s in 1 s "
                  f"({row['recovery_peak_5s']:.0f}/s over 5 s) against {steady:.1f}/s idle")
    for row in summary:
        f = row.get("forced")
        if f and row["engine"] == "nodestatus":
            print(f"- N = {row['n']}, {row['engine']}: forced reports (status written with nothing changed, report period {f['period']} s) in the {f['span']:.0f} s idle phase: "
                  f"{f['nodes']} of {row['n']} nodes, {f['rate']:.2f}/s against the model's {f['model']:.2f}/s")
    for row in summary:
        r = row.get("plugin_rollout")
        if not r:
            continue
        on = f"{r['fleet_on_new_after']:.1f} s" if r["fleet_on_new_after"] is not None else f"not all ({r['nodes_on_new']} of {row['n']})"
        first = f"{r['first_node_after']:.1f} s" if r["first_node_after"] is not None else "-"
        print(f"- N = {row['n']}, {row['engine']}: plugin rollout: the first node wrote the new version after {first}, every node after {on}; "
              f"{r['nodes_once']} of {row['n']} nodes wrote it exactly once")
        for v in r["versions"]:
            print(f"  - version {v['version']}: registry blob GETs {v['registry_blob_gets']}, simulator pulls {v['simulator_pulls']}, refusals logged {v['simulator_refusals']}")
        if "refused_changed" in r:
            print(f"  - refused version (signed by another key): {r['refused_changed']} nodes changed the condition; most not Ready {r['refused_not_ready']}")
    (root / "summary.json").write_text(json.dumps(summary, indent=1))


def plot(res, path: Path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(matplotlib missing: no {path})", file=sys.stderr)
        return
    reqs = res["reqs"]
    t0 = min(p["from"] for p in res["phases"])
    groups = {
        "lease update": lambda r: r["res"] == "leases" and r["verb"] == "update",
        "status patch": lambda r: r["res"] == "nodes/status",
        "node get/list/watch": lambda r: r["res"] == "nodes" and r["verb"] in ("get", "list", "watch"),
        "event create": lambda r: r["res"] == "events",
        "other": None,
    }
    series = defaultdict(Counter)
    for r in reqs:
        g = next((k for k, f in groups.items() if f and f(r)), "other")
        series[g][int(r["at"] - t0)] += 1
    end = int(max(p["to"] for p in res["phases"]) - t0) + 1
    fig, ax = plt.subplots(figsize=(11, 4))
    for g in groups:
        xs = list(range(end))
        ax.plot(xs, [series[g].get(x, 0) for x in xs], label=g, linewidth=0.8)
    for p in res["phases"]:
        ax.axvspan(p["from"] - t0, p["to"] - t0, alpha=0.08 if p["name"] != "outage" else 0.25,
                   color="grey" if p["name"] != "outage" else "red")
        ax.text(p["from"] - t0 + 2, ax.get_ylim()[1] * 0.92, p["name"], fontsize=8)
    ax.axhline(res["nodes"] / 10, color="black", linestyle=":", linewidth=0.8, label="kubelet model: N/10 lease updates/s")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("requests / s")
    who = "nodestatus simulate" if res["engine"] == "nodestatus" else res["engine"]
    ax.set_title(f"{who}, {res['nodes']} nodes: apiserver requests per second (audit log)")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    main()

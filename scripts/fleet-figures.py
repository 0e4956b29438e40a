#!/usr/bin/env python3
"""The fleet table and plots of docs/benchmarks.md from scripts/fleet-bench.sh.

Reads <dir>/<N>/result.json (the phases and the 5 s samples of the test
fleet::bench) and <dir>/<N>/audit.log (every request of the simulator, its
writes with their bodies), and prints, per N and phase:

- requests a second by verb and resource, and bytes a second of the write
  bodies (the JSON the audit log holds: the object or patch the engine sent);
- the lease updates and status patches against the kubelet's model (a lease
  every 10 s, a status patch every 5 min on an idle node);
- the outage: peak requests a second after the recovery, and the time until
  every node's lease was renewed;
- the engine's CPU seconds per node per minute and RSS per node;
- the most nodes seen not Ready at once (the node lifecycle controller).

Writes docs/fleet-<N>-rate.png: requests a second over the run, by resource,
with the phases marked.

    scripts/fleet-figures.py DIR DOCS N...
"""

import json
import sys
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

USER = "nodestatus-simulator"


def ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def audit(path: Path):
    out = []
    with open(path) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("user", {}).get("username") != USER:
                continue
            o = e.get("objectRef", {})
            res = o.get("resource", "?")
            if o.get("subresource"):
                res += "/" + o["subresource"]
            body = e.get("requestObject")
            out.append({
                "at": ts(e["requestReceivedTimestamp"]),
                "verb": e.get("verb", "?"),
                "res": res,
                "name": o.get("name", ""),
                "code": e.get("responseStatus", {}).get("code", 0),
                "bytes": len(json.dumps(body, separators=(",", ":"))) if body is not None else 0,
            })
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


def main():
    root, docs, sizes = Path(sys.argv[1]), Path(sys.argv[2]), [int(n) for n in sys.argv[3:]]
    summary = []
    for n in sizes:
        res_path = root / str(n) / "result.json"
        if not res_path.exists():
            print(f"## N = {n}: not run (no {res_path})\n")
            continue
        res = json.loads(res_path.read_text())
        reqs = audit(Path(res["audit_log"]))
        phases = {p["name"]: p for p in res["phases"]}
        samples = res["samples"]
        print(f"## N = {n} ({res['cpus']} CPUs; load at the end {res['loadavg']})\n")
        print("| phase | seconds | verb | resource | requests/s | bytes/s |")
        print("|---|---|---|---|---|---|")
        for name in ["start", "idle", "flapping", "rollout", "outage", "recovery"]:
            if name not in phases:
                continue
            span, _, rows = phase_rows(reqs, phases[name])
            for (verb, resname), (rate, bps) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
                print(f"| {name} | {span:.0f} | {verb} | {resname} | {rate:.2f} | {bps:.0f} |")
        print()
        model_lease = n / 10
        row = {"n": n}
        for name in ["idle", "flapping", "rollout", "recovery"]:
            if name not in phases:
                continue
            span, inside, rows = phase_rows(reqs, phases[name])
            lease = rows.get(("update", "leases"), (0, 0))[0]
            status = rows.get(("patch", "nodes/status"), (0, 0))[0]
            total = sum(r for r, _ in rows.values())
            s = samples_in(samples, phases[name])
            not_ready = max((x["not_ready"] for x in s if x["not_ready"] is not None), default=None)
            row[name] = {
                "lease": lease, "lease_ratio": lease / model_lease, "status": status,
                "total": total, "peak": peak(inside, phases[name]["from"], phases[name]["to"]),
                "cpu": cpu_per_node_minute(samples, phases[name], n),
                "rss": (s[-1]["rss_bytes"] / n) if s else None,
                "not_ready": not_ready,
            }
        if "recovery" in phases:
            up = phases["recovery"]["from"]
            first = {}
            for r in reqs:
                if r["at"] >= up and r["verb"] == "update" and r["res"] == "leases" and r["code"] < 300:
                    first.setdefault(r["name"], r["at"])
            row["fresh_after"] = (max(first.values()) - up) if len(first) == n else None
            row["fresh_nodes"] = len(first)
            row["recovery_peak"] = peak(reqs, up, up + 60)
            row["recovery_peak_5s"] = peak(reqs, up, up + 60, 5.0)
        summary.append(row)
        plot(reqs, res, docs / f"fleet-{n}-rate.png")
    print("| N | phase | lease updates/s (x kubelet N/10) | status patches/s | all requests/s | peak/s | engine CPU s per node-minute | RSS per node | most NotReady |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in summary:
        for name in ["idle", "flapping", "rollout", "recovery"]:
            if name not in row:
                continue
            p = row[name]
            cpu = f"{p['cpu']:.4f}" if p["cpu"] is not None else "-"
            rss = f"{p['rss'] / 1e6:.2f} MB" if p["rss"] is not None else "-"
            print(f"| {row['n']} | {name} | {p['lease']:.2f} ({p['lease_ratio']:.3f}x) | {p['status']:.3f} | {p['total']:.2f} | {p['peak']:.0f} | {cpu} | {rss} | {p['not_ready']} |")
    print()
    for row in summary:
        if "fresh_nodes" in row:
            fresh = f"{row['fresh_after']:.1f} s" if row["fresh_after"] is not None else f"not all ({row['fresh_nodes']} of {row['n']})"
            steady = row["idle"]["total"] if "idle" in row else float("nan")
            print(f"- N = {row['n']}: after the 60 s outage every lease fresh within {fresh}; peak {row['recovery_peak']:.0f} requests/s in 1 s "
                  f"({row['recovery_peak_5s']:.0f}/s over 5 s) against {steady:.1f}/s idle")
    (Path(sys.argv[1]) / "summary.json").write_text(json.dumps(summary, indent=1))


def plot(reqs, res, path: Path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(matplotlib missing: no {path})", file=sys.stderr)
        return
    t0 = min(p["from"] for p in res["phases"])
    groups = {
        "lease update": lambda r: r["res"] == "leases" and r["verb"] == "update",
        "status patch": lambda r: r["res"] == "nodes/status",
        "node get/list/watch": lambda r: r["res"] == "nodes" and r["verb"] in ("get", "list", "watch"),
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
    ax.set_title(f"nodestatus simulate, {res['nodes']} nodes: apiserver requests per second (audit log)")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    main()

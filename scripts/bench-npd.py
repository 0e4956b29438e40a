#!/usr/bin/env python3
"""The side-by-side bench of issue 43, item 8: node-problem-detector (NPD)
and nodestatus on one machine, one real kube-apiserver and the same kernel
messages written to the real /dev/kmsg. scripts/bench-npd.sh runs it (as
root, under the kernel-log bench lock); run that, not this.

NPD runs its published config/kernel-monitor.json unchanged; nodestatus
runs plugins/log-rules with that same file as its settings. Each reports on
a node of its own (one node would have both write the same condition types,
and neither's figure could be told apart): nodestatus registers its node
through `nodestatus run`'s embedded cluster, and the bench creates NPD's
node object there with kubectl, as an installer would.

Phases, in one run:
1. idle: both running, nothing written, `--idle` seconds (CPU, RSS);
2. compare: one line for each rule of kernel-monitor.json, each carrying
   the run's id: the conditions and events each tool makes of them, and
   the latency of each to the node's condition and to the Event;
3. latency: `--messages` TaskHung lines, 0.5 to 1.5 s apart: the latency
   of each to its Event on the apiserver, per tool;
4. flood: `--flood-rate` unmatched lines a second for `--flood-seconds`
   (kernel.printk_devkmsg on), CPU (utime+stime of /proc/PID/stat) and RSS
   (VmRSS of /proc/PID/status, every second) of each, then one matched
   line that both must still report.

The raw result (JSON) is written to --out; scripts/npd-figures.py makes the
table of docs/benchmarks.md from it.
"""

import argparse
import hashlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

NS_NODE = "npd-bench-nodestatus"
NPD_NODE = "npd-bench-npd"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"[bench-npd {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- the kernel log ---------------------------------------------------------


def kmsg(line, prio=4):
    fd = os.open("/dev/kmsg", os.O_WRONLY)
    try:
        os.write(fd, f"<{prio}>{line}\n".encode())
    finally:
        os.close(fd)


def kmsg_records():
    """(seconds since boot, message) of every record the ring holds now."""
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    out = []
    try:
        while True:
            try:
                rec = os.read(fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:  # overwritten while read: go on
                continue
            head, _, msg = rec.decode(errors="replace").partition(";")
            fields = head.split(",")
            if len(fields) >= 3:
                out.append((int(fields[2]) / 1e6, msg.split("\n", 1)[0]))
    finally:
        os.close(fd)
    return out


def uptime():
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def go_duration_s(s):
    """A Go duration as kernel-monitor.json writes its lookback ("5m")."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3}
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|h|m|s)", s):
        if m.start() != pos:
            raise ValueError(f"not a Go duration: {s!r}")
        total += float(m.group(1)) * units[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"not a Go duration: {s!r}")
    return total


def wait_for_quiet_lookback(config, limit_s):
    """Both tools read the kernel log `lookback` back at start: a line an
    earlier run or test wrote within it would set a condition or spend
    NPD's event budget before the bench writes anything. Waits until no
    record within lookback (and 15 s) matches a rule; returns what was
    still there when `limit_s` ran out."""
    lookback = go_duration_s(config.get("lookback", "0s"))
    rules = [re.compile(r["pattern"] + r"\Z") for r in config["rules"]]
    deadline = time.monotonic() + limit_s
    while True:
        now = uptime()
        recent = [
            (now - t, m) for t, m in kmsg_records() if now - t <= lookback + 15 and any(r.search(m) for r in rules)
        ]
        if not recent or time.monotonic() >= deadline:
            return recent
        oldest = max(age for age, _ in recent)
        wait = min(lookback + 16 - oldest, deadline - time.monotonic())
        log(f"{len(recent)} matching kernel line(s) within the lookback; waiting {wait:.0f} s for them to age out")
        time.sleep(max(1.0, wait))


def compare_lines(run):
    """One line per rule of kernel-monitor.json, each carrying `run` where
    the pattern allows: (rule index it is written for, line)."""
    return [
        (0, f"Killed process {run} (npdbench-{run}) total-vm:1000kB, anon-rss:100kB, file-rss:0kB, shmem-rss:0kB"),
        (1, f"task npdbench-{run}:4242 blocked for more than 120 seconds."),
        (2, f"unregister_netdevice: waiting for npdbench{run} to become free. Usage count = 1"),
        (3, f"BUG: unable to handle kernel NULL pointer dereference at npdbench-{run}"),
        (4, f"npdbench-{run} divide error: 0000 [#{run}] SMP"),
        (5, f"EXT4-fs error (device npdbench{run}): ext4_find_entry:1455: inode #2: comm bench: reading directory lblock 0"),
        (6, f"EXT4-fs warning (device npdbench{run}): ext4_dx_add_entry:2006: Directory index full!"),
        (7, f"Buffer I/O error on dev npdbench{run}, logical block 0, async page read"),
        (8, f"XFS (npdbench{run}): Shutting down filesystem"),
        (9, f"CE memory read error on npdbench-{run}"),
        (10, f"npdbench-{run} [Hardware Error]: event severity: corrected"),
        (11, f"npdbench-{run} [Hardware Error]: event severity: recoverable"),
        (12, f"npdbench-{run} [Hardware Error]: event severity: fatal"),
        (13, f"task docker:{run} blocked for more than 120 seconds."),
    ]


# --- processes ---------------------------------------------------------------


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15; fields[0] here is field 3.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Watch:
    """`kubectl get ... --watch -o json`: every object it prints, with the
    time it arrived here (time.monotonic())."""

    def __init__(self, kubectl, kubeconfig, args, seen, lock, tag):
        self.proc = subprocess.Popen(
            [kubectl, "--kubeconfig", kubeconfig, "get", *args, "--watch", "-o", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.thread = threading.Thread(target=self._read, args=(seen, lock, tag), daemon=True)
        self.thread.start()

    def _read(self, seen, lock, tag):
        dec = json.JSONDecoder()
        buf = ""
        for line in self.proc.stdout:
            buf += line
            while True:
                stripped = buf.lstrip()
                if not stripped:
                    buf = ""
                    break
                try:
                    obj, end = dec.raw_decode(stripped)
                except json.JSONDecodeError:
                    break
                now = time.monotonic()
                with lock:
                    seen.append((now, tag, obj))
                buf = stripped[end:]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def condition(node, ctype):
    for c in node.get("status", {}).get("conditions", []) or []:
        if c.get("type") == ctype:
            return c
    return None


def flood_writer(rate, seconds, run):
    """Writes `rate` unmatched lines a second for `seconds`, in 10 ms
    slices; prints the lines written and the seconds taken."""
    fd = os.open("/dev/kmsg", os.O_WRONLY)
    per_slice = max(1, rate // 100)
    n = 0
    start = time.monotonic()
    slices = int(seconds * 100)
    for k in range(slices):
        for _ in range(per_slice):
            os.write(fd, f"<6>npdbench-flood {run} {n} this line matches no rule\n".encode())
            n += 1
        target = start + (k + 1) / 100
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    os.close(fd)
    print(json.dumps({"lines": n, "seconds": time.monotonic() - start}))


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    i = min(len(sorted_values) - 1, max(0, int(round(q * len(sorted_values) + 0.5)) - 1))
    return sorted_values[i]


def summary(values):
    v = sorted(x for x in values if x is not None)
    return {
        "seen": len(v),
        "p50_s": percentile(v, 0.5),
        "p99_s": percentile(v, 0.99),
        "max_s": v[-1] if v else None,
    }


# --- the run ------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flood-writer", nargs=3, metavar=("RATE", "SECONDS", "RUN"), help=argparse.SUPPRESS)
    ap.add_argument("--nodestatus")
    ap.add_argument("--profile", help="release or debug: the nodestatus binary's build")
    ap.add_argument("--nodestatus-commit", help="the newest commit of its checkout before it was built")
    ap.add_argument("--nodestatus-built", help="when the binary was built")
    ap.add_argument("--plugin", help="log-rules.wasm")
    ap.add_argument("--npd")
    ap.add_argument("--npd-commit")
    ap.add_argument("--npd-config", help="NPD's config/kernel-monitor.json")
    ap.add_argument("--apiserver", help="kube-apiserver (kubectl beside it)")
    ap.add_argument("--work", help="a fresh directory for configs, logs and the embedded cluster")
    ap.add_argument("--out", help="the raw result (JSON)")
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--idle", type=float, default=30)
    ap.add_argument("--flood-rate", type=int, default=10_000)
    ap.add_argument("--flood-seconds", type=float, default=60)
    ap.add_argument("--quiet-limit", type=float, default=330, help="the longest wait for the lookback to be clear")
    a = ap.parse_args()
    if a.flood_writer:
        flood_writer(int(a.flood_writer[0]), float(a.flood_writer[1]), a.flood_writer[2])
        return
    for name in ["nodestatus", "profile", "nodestatus_commit", "nodestatus_built", "plugin", "npd", "npd_commit", "npd_config", "apiserver", "work", "out"]:
        if getattr(a, name) is None:
            ap.error(f"--{name.replace('_', '-')} is required")
    run_bench(a)


def run_bench(a):
    config_text = open(a.npd_config).read()
    config = json.loads(config_text)
    kubectl = os.path.join(os.path.dirname(a.apiserver), "kubectl")
    os.makedirs(a.work, exist_ok=True)
    run = str(random.SystemRandom().randrange(100000, 999999))
    left_in_lookback = wait_for_quiet_lookback(config, a.quiet_limit)
    if left_in_lookback:
        log(f"{len(left_in_lookback)} matching line(s) still within the lookback: recorded, the run goes on")
    started_at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with open("/proc/loadavg") as f:
        load_start = f.read().strip()

    # nodestatus: the embedded cluster, its node, log-rules with the file.
    plugin_dir = os.path.join(a.work, "plugins")
    os.makedirs(plugin_dir, exist_ok=True)
    with open(a.plugin, "rb") as src, open(os.path.join(plugin_dir, "log-rules.wasm"), "wb") as dst:
        dst.write(src.read())
    ns_config = os.path.join(a.work, "nodestatus.yaml")
    indented = "\n".join("      " + line for line in config_text.rstrip("\n").split("\n"))
    with open(ns_config, "w") as f:
        f.write(
            f"nodeName: {NS_NODE}\n"
            f"pluginDir: {plugin_dir}\n"
            "plugins:\n"
            "  log-rules:\n"
            "    streams: [kmsg]\n"
            "    eventsPerMinute: 600\n"
            "    config:\n"
            f"{indented}\n"
        )
    embedded = os.path.join(a.work, "embedded")
    env = dict(os.environ, NODESTATUS_APISERVER=a.apiserver)
    env.pop("KUBECONFIG", None)
    ns_port = free_port()
    ns_log = open(os.path.join(a.work, "nodestatus.log"), "w")
    ns = subprocess.Popen(
        [a.nodestatus, "run", "--embedded-dir", embedded, "--config", ns_config, "--address", f"127.0.0.1:{ns_port}"],
        stdout=ns_log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    procs = {"nodestatus": ns}
    npd = None
    watches = []
    seen, lock = [], threading.Lock()
    devkmsg = open("/proc/sys/kernel/printk_devkmsg").read().strip()

    def stop_cluster():
        # The embedded cluster outlives nodestatus: stop it.
        subprocess.run([a.nodestatus, "run", "--embedded-stop", "--embedded-dir", embedded], env=env, capture_output=True)

    done = False
    try:
        admin = os.path.join(embedded, "kubeconfig-admin")
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and ns.poll() is None:
            if os.path.exists(admin):
                r = subprocess.run([kubectl, "--kubeconfig", admin, "get", "node", NS_NODE, "-o", "json"], capture_output=True, text=True)
                if r.returncode == 0:
                    node = json.loads(r.stdout)
                    if condition(node, config["conditions"][0]["type"]):
                        break
            time.sleep(1)
        else:
            raise SystemExit(f"nodestatus never reported {NS_NODE}'s conditions: see {ns_log.name}")
        log(f"nodestatus reports {NS_NODE}")
        server = None
        for line in open(admin):
            if line.strip().startswith("server:"):
                server = line.split(":", 1)[1].strip()
        # NPD's node, as an installer registers one; NPD patches its status.
        node_obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NPD_NODE, "labels": {"bench": "npd"}}}
        subprocess.run([kubectl, "--kubeconfig", admin, "apply", "-f", "-"], input=json.dumps(node_obj), text=True, check=True, capture_output=True)
        npd_log = open(os.path.join(a.work, "npd.log"), "w")
        npd = subprocess.Popen(
            [
                a.npd,
                f"--config.system-log-monitor={a.npd_config}",
                f"--apiserver-override={server}?inClusterConfig=false&auth={admin}",
                f"--hostname-override={NPD_NODE}",
                "--port=0",
                "--prometheus-port=0",
            ],
            stdout=npd_log,
            stderr=subprocess.STDOUT,
        )
        procs["npd"] = npd
        deadline = time.monotonic() + 60
        while True:
            r = subprocess.run([kubectl, "--kubeconfig", admin, "get", "node", NPD_NODE, "-o", "json"], capture_output=True, text=True)
            if r.returncode == 0 and condition(json.loads(r.stdout), config["conditions"][0]["type"]):
                break
            if time.monotonic() > deadline or npd.poll() is not None:
                raise SystemExit(f"NPD never reported {NPD_NODE}'s conditions: see {npd_log.name}")
            time.sleep(1)
        log(f"NPD reports {NPD_NODE}")
        with open("/proc/sys/kernel/printk_devkmsg", "w") as f:
            f.write("on\n")

        for tag, args in [
            ("node:nodestatus", ["node", NS_NODE]),
            ("node:npd", ["node", NPD_NODE]),
            ("events", ["events", "-n", "default"]),
        ]:
            watches.append(Watch(kubectl, admin, args, seen, lock, tag))
        time.sleep(3)
        at_start = {}
        for tool, nm in [("nodestatus", NS_NODE), ("npd", NPD_NODE)]:
            r = subprocess.run([kubectl, "--kubeconfig", admin, "get", "node", nm, "-o", "json"], capture_output=True, text=True, check=True)
            n = json.loads(r.stdout)
            at_start[tool] = {c["type"]: {k: condition(n, c["type"]).get(k) for k in ["status", "reason", "message"]} for c in config["conditions"] if condition(n, c["type"])}

        # 1. idle.
        log(f"idle {a.idle:.0f} s")
        idle = measure(procs, lambda: time.sleep(a.idle))

        # 2. compare: one line per rule.
        log("compare: one line per rule")
        written = []
        for rule, line in compare_lines(run):
            kmsg(line)
            written.append({"rule": rule, "text": line, "at": time.monotonic()})
            time.sleep(2)
        time.sleep(8)

        # 3. latency.
        log(f"latency: {a.messages} TaskHung lines")
        rng = random.Random(12345)
        lat_written = []
        for i in range(a.messages):
            time.sleep(0.5 + rng.random())
            text = f"task npdbench-{run}-{i:03d}:4242 blocked for more than 120 seconds."
            kmsg(text)
            now = time.monotonic()
            gap = round(now - lat_written[-1]["at"], 4) if lat_written else None
            lat_written.append({"text": text, "at": now, "gap_s": gap})
        time.sleep(5)

        # 4. flood.
        log(f"flood: {a.flood_rate} unmatched lines/s for {a.flood_seconds:.0f} s")
        result = {}

        def flood():
            r = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--flood-writer", str(a.flood_rate), str(a.flood_seconds), run],
                capture_output=True,
                text=True,
                check=True,
            )
            result.update(json.loads(r.stdout))

        flooded = measure(procs, flood)
        time.sleep(5)
        after_text = f"task npdbench-{run}-after:4242 blocked for more than 120 seconds."
        kmsg(after_text)
        after_at = time.monotonic()
        time.sleep(10)
        done = True
    finally:
        try:
            with open("/proc/sys/kernel/printk_devkmsg", "w") as f:
                f.write(devkmsg + "\n")
        except OSError:
            pass
        for w in watches:
            w.stop()
        for p in [npd, ns]:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if not done:
            stop_cluster()

    try:
        final = {}
        for tool, nm in [("nodestatus", NS_NODE), ("npd", NPD_NODE)]:
            r = subprocess.run([kubectl, "--kubeconfig", admin, "get", "node", nm, "-o", "json"], capture_output=True, text=True, check=True)
            final[tool] = [
                {k: c.get(k) for k in ["type", "status", "reason", "message"]}
                for c in json.loads(r.stdout)["status"].get("conditions", [])
                if c["type"] in {d["type"] for d in config["conditions"]}
            ]
        r = subprocess.run([kubectl, "--kubeconfig", admin, "get", "events", "-n", "default", "-o", "json"], capture_output=True, text=True, check=True)
        all_events = json.loads(r.stdout)["items"]
    finally:
        stop_cluster()

    with open("/proc/loadavg") as f:
        load_end = f.read().strip()
    tools = {"nodestatus": NS_NODE, "npd": NPD_NODE}
    # NPD logs each match it makes ("New status generated"), sent or not.
    with open(os.path.join(a.work, "npd.log")) as f:
        npd_matches = sum("New status generated" in line for line in f)
    out = {
        "date": started_at,
        "load_start": load_start,
        "load_end": load_end,
        "run": run,
        "nodestatus": {"commit": a.nodestatus_commit, "built": a.nodestatus_built, "profile": a.profile, "binary_sha256": sha256(a.nodestatus), "plugin_sha256": sha256(a.plugin)},
        "npd": {"commit": a.npd_commit, "binary": a.npd, "config": "config/kernel-monitor.json", "matches_logged": npd_matches},
        "nodes": tools,
        "left_in_lookback": [{"age_s": round(age, 1), "text": m} for age, m in left_in_lookback],
        "conditions_at_start": at_start,
        "idle": idle,
        "compare": compare(config, written, seen, tools),
        "latency": latency(lat_written, seen, tools),
        "flood": dict(flooded, lines_written=result.get("lines"), seconds=result.get("seconds"), rate=a.flood_rate),
        "after_flood": {t: first_event(seen, tools[t], after_text, after_at) for t in tools},
        "conditions_final": final,
        "events_final": [
            {
                "node": e["involvedObject"].get("name"),
                "type": e.get("type"),
                "reason": e.get("reason"),
                "message": e.get("message"),
                "count": e.get("count"),
                "source": e.get("source", {}).get("component"),
            }
            for e in all_events
            if e["involvedObject"].get("name") in tools.values() and run in (e.get("message") or "")
        ],
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    log(f"wrote {a.out}")


def measure(procs, during):
    """CPU seconds and RSS (first, max, every second) of each process
    while `during` runs in a thread."""
    cpu0 = {t: cpu_s(p.pid) for t, p in procs.items()}
    rss = {t: [] for t in procs}
    th = threading.Thread(target=during)
    start = time.monotonic()
    th.start()
    while th.is_alive():
        for t, p in procs.items():
            rss[t].append(rss_mb(p.pid))
        th.join(1.0)
    secs = time.monotonic() - start
    out = {"wall_s": secs}
    for t, p in procs.items():
        c = cpu_s(p.pid) - cpu0[t]
        out[t] = {
            "cpu_s": c,
            "core_share": c / secs,
            "rss_mb_first": rss[t][0],
            "rss_mb_max": max(rss[t]),
            "rss_mb_last": rss_mb(p.pid),
        }
    return out


def events_of(seen, node):
    return [(t, o) for t, tag, o in seen if tag == "events" and o.get("involvedObject", {}).get("name") == node]


def first_event(seen, node, text, at):
    for t, o in events_of(seen, node):
        if t >= at and text in (o.get("message") or ""):
            return round(t - at, 4)
    return None


def first_condition(seen, tool, ctype, text, at):
    for t, tag, o in seen:
        if tag == f"node:{tool}" and t >= at:
            c = condition(o, ctype)
            if c and c.get("status") == "True" and text in (c.get("message") or ""):
                return round(t - at, 4)
    return None


def compare(config, written, seen, tools):
    """Per line written: the events each tool made of it (type, reason,
    message, as last seen) and, for a permanent rule, its condition and
    the latencies."""
    out = []
    rules = config["rules"]
    for w in written:
        rule = rules[w["rule"]]
        row = {"rule": w["rule"], "type": rule["type"], "reason": rule["reason"], "text": w["text"], "tools": {}}
        for tool, node in tools.items():
            evs = {}
            for t, o in events_of(seen, node):
                if w["text"] in (o.get("message") or "") and t >= w["at"]:
                    key = o["metadata"]["name"]
                    first = evs.get(key, {}).get("latency_s", round(t - w["at"], 4))
                    evs[key] = {"type": o.get("type"), "reason": o.get("reason"), "message": o.get("message"), "count": o.get("count"), "source": o.get("source", {}).get("component"), "latency_s": first}
            entry = {"events": sorted(evs.values(), key=lambda e: (e["reason"], e["message"]))}
            if rule["type"] == "permanent":
                entry["condition"] = rule["condition"]
                entry["condition_latency_s"] = first_condition(seen, tool, rule["condition"], w["text"], w["at"])
                last = None
                for _, tag, o in seen:
                    if tag == f"node:{tool}":
                        c = condition(o, rule["condition"])
                        if c:
                            last = {k: c.get(k) for k in ["status", "reason", "message"]}
                entry["condition_last"] = last
            row["tools"][tool] = entry
        out.append(row)
    return out


def latency(written, seen, tools):
    out = {"messages": len(written)}
    for tool, node in tools.items():
        per = [first_event(seen, node, w["text"], w["at"]) for w in written]
        out[tool] = dict(summary(per), per_message_s=per)
    out["gap_s"] = [w["gap_s"] for w in written]
    return out


if __name__ == "__main__":
    main()

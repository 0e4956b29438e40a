#!/usr/bin/env python3
"""Where the fleet bench's engine spent its CPU (issue 32, item 7).

    scripts/fleet-profile.py target/fleet-bench/nodestatus-1000

reads `perf.data` (recorded through the flapping phase when the bench ran
with NODESTATUS_FLEET_PERF, 99 samples a second of each thread, user stacks
unwound from DWARF) and `result.json` beside it, and prints two tables in
Markdown, each with a row's share of the samples and that share of the
phase's measured CPU seconds per node-minute:

- **by code**: the sample's innermost frame that belongs to a part of the
  engine (the guest's compiled code, wasmtime, the host's plugin runtime,
  the pass, JSON, TLS, HTTP, the engine's loops, tokio, logging), walking
  out through the standard library, the allocator and the kernel, whose
  time counts for the code that called them. The kernel's share of each
  row is given beside it, the allocator's whole share above the table.
- **by activity**: what the sample was for, from the frames anywhere on its
  stack, in this order: a setter's call, the rest of the pass, the status
  sync, the lease, the node watch, the plugin sources; else the shared HTTP
  connection tasks, kube-client's request code, or tokio's scheduler.

Sampled by perf, not measured: a row under about 2 % rests on a few dozen
samples.
"""
import collections
import json
import re
import subprocess
import sys
from pathlib import Path

# Frames that are no part's own: their time is the caller's.
GENERIC = {
    "core", "alloc", "std", "hashbrown", "memchr", "bytes", "indexmap",
    "smallvec", "either", "once_cell", "parking_lot", "parking_lot_core",
    "lock_api", "crossbeam_utils", "crossbeam_channel", "futures_util",
    "futures_core", "pin_project_lite", "slab", "arc_swap", "itoa", "ryu",
    "rustix", "__rustc",
}

# By code: (row, crates or path prefixes), the first that matches.
CODE = [
    ("setters: wasmtime (instances, calls, WASI)",
     ("wasmtime*", "cranelift*", "winch*", "wasmparser", "wit_parser")),
    ("setters: the host's runtime (facts, host functions)", ("nodestatus_runtime",)),
    ("the pass (parts, merge, checks, the node)",
     ("nodestatus_model", "nodestatus_engine::pipeline", "json_patch")),
    ("JSON (serde_json, the API types' serde)",
     ("serde_json", "serde", "serde_core", "serde_path_to_error", "k8s_openapi")),
    ("TLS (rustls, ring)", ("rustls", "ring", "tokio_rustls", "hyper_rustls", "webpki", "rustls_webpki")),
    ("HTTP (hyper, h2, kube-client, tower)",
     ("hyper", "h2", "http", "http_body", "http_body_util", "hyper_util", "httparse",
      "tower", "tower_http", "kube_client", "kube_core", "kube", "kube_runtime", "base64")),
    ("the engine's loops (lease, sync, watch, register)",
     ("nodestatus_engine", "nodestatus_fleet", "nodestatus_registry", "nodestatus",
      "notify", "notify_debouncer_full")),
    ("logging and metrics (tracing, prometheus)",
     ("tracing", "tracing_core", "tracing_subscriber", "prometheus_client")),
    ("tokio (scheduler, timers, I/O driver)", ("tokio", "mio")),
]

# By activity: (row, markers in a frame's symbol), the first row with a
# marker in any frame of the sample decides.
ACTIVITY = [
    ("a setter's call (the sandbox)", ("nodestatus_runtime::plugin::", "wasm[")),
    ("the rest of the pass", ("nodestatus_engine::pipeline", "nodestatus_runtime::")),
    ("the status sync (decide, patch)", ("nodestatus_engine::agent::sync", "nodestatus_engine::agent::decide")),
    ("the lease", ("nodestatus_engine::agent::lease",)),
    ("the node watch", ("nodestatus_engine::agent::watch",)),
    ("registering", ("nodestatus_engine::agent::register",)),
    ("the plugin sources (registry, config, directory)",
     ("nodestatus_registry", "live_config", "puller", "plugin_dir", "nodestatus_engine::plugins")),
    ("the rest of the agent (driver, state, health)", ("nodestatus_engine::agent", "nodestatus_fleet")),
    ("shared HTTP connections (hyper and h2 tasks, TLS)", ("hyper::", "h2::", "hyper_util::", "rustls::", "tokio_rustls::")),
    ("kube-client (requests, decoding)", ("kube_client::",)),
    ("tokio's scheduler and I/O driver", ("tokio::",)),
]


def crate_of(sym):
    """The crate (or path) a demangled Rust symbol belongs to."""
    s = sym
    m = re.match(r"core::ptr::drop_in_place<(.*)>$", s)
    if m:
        s = m.group(1)
    s = re.sub(r"^(?:[<&(]|dyn |mut |const |\*)+", "", s)
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", s)
    return (m.group(1), s) if m else (None, s)


# The allocator: glibc's malloc family and Rust's global allocator (the
# binary's `ChildAllocator` over the system's). Its time counts for the
# code that allocated; its own share is printed apart.
MALLOC = re.compile(
    r"^(__libc_)?(malloc|free|cfree|realloc|calloc)(@.*)?$|^_int_|^malloc_|^tcache_|"
    r"^unlink_chunk|^sysmalloc|^__rust_(alloc|dealloc|realloc)|^__rdl_|GlobalAlloc"
)


def is_allocator(sym, dso):
    return bool(MALLOC.search(sym)) or (dso.endswith("libc.so.6") and sym.startswith("_int_"))


def in_allocator(frames):
    """Whether the sample's innermost user frames are the allocator's."""
    user = [(s, d) for s, d in frames if d != "[kernel.kallsyms]"]
    return bool(user) and is_allocator(*user[0])


def code_row(frames):
    """(row, in the kernel) of one sample, from its frames, leaf first."""
    kernel = bool(frames) and frames[0][1] == "[kernel.kallsyms]"
    for sym, dso in frames:
        if sym.startswith("wasm[") or dso.endswith(".cwasm"):
            return "setters: the guests' compiled code", kernel
        if dso == "[kernel.kallsyms]" or sym == "[unknown]" or is_allocator(sym, dso):
            continue
        crate, path = crate_of(sym)
        if crate is None or crate in GENERIC:
            continue
        for row, names in CODE:
            for name in names:
                if (
                    crate == name
                    or (name.endswith("*") and crate.startswith(name[:-1]))
                    or ("::" in name and path.startswith(name))
                ):
                    return row, kernel
        return f"other ({crate})", kernel
    return "the kernel alone (thread switches, sleeps)", kernel


def activity_row(frames):
    if any(dso.endswith(".cwasm") for _, dso in frames):
        return ACTIVITY[0][0]
    for row, marks in ACTIVITY:
        if any(m in sym for sym, _ in frames for m in marks):
            return row
    return "the kernel alone (thread switches, sleeps)"


def samples(perf_data):
    out = subprocess.run(
        ["perf", "script", "-i", str(perf_data), "--no-inline", "-F", "comm,tid,ip,sym,dso"],
        check=True, capture_output=True, text=True,
    ).stdout
    for block in out.split("\n\n"):
        lines = [l for l in block.splitlines() if l.strip()]
        if not lines:
            continue
        comm = lines[0].split()[0]
        frames = []
        for l in lines[1:]:
            m = re.match(r"\s*[0-9a-f]+ (.*) \((.*)\)$", l)
            if m:
                sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1))
                frames.append((sym, m.group(2)))
        yield comm, frames


def cpu_per_node_minute(result, phase):
    p = next(p for p in result["phases"] if p["name"] == phase)
    inside = [s for s in result["samples"] if p["from"] - 0.5 <= s["at"] <= p["to"] + 0.5]
    first, last = inside[0], inside[-1]
    minutes = (last["at"] - first["at"]) / 60
    return (last["cpu_seconds"] - first["cpu_seconds"]) / result["nodes"] / minutes


def table(title, counts, total, cpu, kernel=None):
    print(f"| {title} | samples | share | CPU-s per node-minute |" + (" in the kernel |" if kernel else ""))
    print("|---|---|---|---|" + ("---|" if kernel else ""))
    for row, n in counts.most_common():
        line = f"| {row} | {n} | {100 * n / total:.1f} % | {cpu * n / total:.4f} |"
        if kernel:
            line += f" {100 * kernel[row] / n:.0f} % |"
        print(line)
    print(f"| all | {total} | 100 % | {cpu:.4f} |" + (" |" if kernel else ""))
    print()


def main():
    out = Path(sys.argv[1])
    result = json.loads((out / "result.json").read_text())
    cpu = cpu_per_node_minute(result, "flapping")
    code, kernel, activity, threads = (collections.Counter() for _ in range(4))
    allocator = 0
    for comm, frames in samples(out / "perf.data"):
        allocator += in_allocator(frames)
        row, in_kernel = code_row(frames)
        code[row] += 1
        kernel[row] += in_kernel
        activity[activity_row(frames)] += 1
        threads[re.sub(r"[-_ ]?\d+$", "", comm)] += 1
    total = sum(code.values())
    print(f"{result['engine']}, N = {result['nodes']}, the flapping phase "
          f"({result['phase_seconds']} s): {total} samples at 99 Hz, "
          f"{cpu:.4f} CPU-s per node-minute measured\n")
    print(f"In the allocator (malloc, free: counted above for the code that "
          f"allocated): {allocator} samples, {100 * allocator / total:.1f} %\n")
    table("by code", code, total, cpu, kernel)
    table("by activity", activity, total, cpu)
    table("by thread", threads, total, cpu)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The figures of docs/benchmarks.md from the last `cargo bench -p nodestatus`.

Reads each benchmark's median (`median.point_estimate`) from
target/criterion/<group>/<name>/new/estimates.json and prints them, then the
goals table's ratios, each computed from two medians of the same run.

    scripts/bench-figures.py [TARGET_DIR]   (default: target)
"""

import json
import sys
from pathlib import Path

DEFAULT_SET = [
    "node-address", "machine-info", "version-info", "daemon-endpoints", "images",
    "os-arch", "memory-pressure", "disk-pressure", "pid-pressure", "volumes", "ready",
]


def medians(root: Path) -> dict:
    out = {}
    for est in sorted(root.glob("**/new/estimates.json")):
        bench = json.loads((est.parent / "benchmark.json").read_text())["full_id"]
        out[bench] = json.loads(est.read_text())["median"]["point_estimate"]
    return out


def fmt(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} µs"


def main() -> None:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "target")
    m = medians(target / "criterion")
    if not m:
        sys.exit(f"no criterion results under {target}/criterion: run cargo bench -p nodestatus")
    print("| benchmark | median |\n|---|---:|")
    for name, ns in m.items():
        print(f"| `{name}` | {fmt(ns)} |")

    def ratio(a: str, b: str) -> str:
        if a in m and b in m:
            return f"{m[a] / m[b]:.1f}x ({fmt(m[a])} / {fmt(m[b])})"
        return "not measured"

    print("\n| figure | measured |\n|---|---|")
    print(f"| default pass, WASM / native | {ratio('pass/default/wasm', 'pass/default/native')} |")
    print(f"| steady pass, WASM / native | {ratio('pass/default/wasm-steady', 'pass/default/native')} |")
    print(f"| default pass, fresh instances, WASM / native | {ratio('pass/default/wasm-fresh', 'pass/default/native')} |")
    for h in ("pass/default/host", "pass/default/host-steady"):
        if h in m:
            print(f"| host work around the calls (`{h}`) | {fmt(m[h])} |")
    for s in DEFAULT_SET:
        print(f"| {s}, WASM / native | {ratio(f'setter/{s}/wasm', f'setter/{s}/native')} |")
        print(f"| {s}, fresh instance, WASM / native | {ratio(f'setter/{s}/wasm-fresh', f'setter/{s}/native')} |")
    print(f"| kernel-check, WASM / native | {ratio('wasm/kernel-check', 'native/kernel-check')} |")
    print(f"| kernel-check, exec plugin / WASM | {ratio('exec/kernel-check', 'wasm/kernel-check')} |")
    print(f"| a WIT 0.1 call / its 0.2 build (os-arch) | {ratio('compat/os-arch/wit-0.1/call', 'compat/os-arch/wit-0.2/call')} |")
    print(f"| a pass of it alone, 0.1 / 0.2 | {ratio('compat/os-arch/wit-0.1/pass', 'compat/os-arch/wit-0.2/pass')} |")
    for g in ("cpu-features", "load-average", "load-average-aot"):
        for b in ("guest/{}/set", "guest/{}/set-reuse", "activate/{}/cached"):
            key = b.format(g)
            if key in m:
                print(f"| `{key}` | {fmt(m[key])} |")


if __name__ == "__main__":
    main()

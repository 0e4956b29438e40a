"""Tests of scripts/guests-figures.py: the bench's lines and criterion's
results read, and the tables kept in step with the newest raw result."""
import importlib.util
import json
import os
import tempfile
import unittest

spec = importlib.util.spec_from_file_location(
    "guests_figures", os.path.join(os.path.dirname(__file__), "guests-figures.py")
)
gf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gf)

LOG = """guest/local-disks/set  time: [1.0 ms 1.1 ms 1.2 ms]
activate/local-disks/watched (once): 312.5 ms from the rename to the watcher's Loaded event, cache warm
activate/local-disks/cold-cranelift (once): 4.25 s from the file dropped to the end of its first set (on optimized's code), compiled in a child process, no cache
activate/local-disks/cold-cranelift: on Cranelift's code 4.30 s after the drop
activate/local-disks/cold-tiered (once): 1.50 s from the file dropped to the end of its first set (on baseline's code), compiled in a child process, no cache
"""


def estimates(root, full_id, seconds):
    group, name = full_id.rsplit("/", 1)
    d = os.path.join(root, group.replace("/", "_"), name, "new")
    os.makedirs(d)
    with open(os.path.join(d, "benchmark.json"), "w") as f:
        json.dump({"full_id": full_id}, f)
    with open(os.path.join(d, "estimates.json"), "w") as f:
        json.dump({"median": {"point_estimate": seconds * 1e9}}, f)


class Collect(unittest.TestCase):
    def test_the_once_lines_are_read_in_seconds_and_the_rest_skipped(self):
        self.assertEqual(
            gf.once_lines(LOG),
            {"local-disks": {"watched": 0.3125, "cold-cranelift": 4.25, "cold-tiered": 1.5}},
        )

    def test_a_run_is_its_medians_its_lines_and_its_sizes(self):
        with tempfile.TemporaryDirectory() as d:
            crit, comps = os.path.join(d, "criterion"), os.path.join(d, "guests")
            estimates(crit, "guest/local-disks/set", 0.0011)
            estimates(crit, "activate/local-disks/cached", 0.05)
            estimates(crit, "setter/ready/wasm", 0.001)  # another bench's: left out
            os.makedirs(comps)
            with open(os.path.join(comps, "local-disks.wasm"), "wb") as f:
                f.write(b"\0" * 1000)
            log = os.path.join(d, "log")
            with open(log, "w") as f:
                f.write(LOG)
            args = gf.argparse.Namespace(log=log, criterion=crit, components=comps,
                                         date="2026-11-29T16:00Z", commit="abc", load="1.0 1.2")
            r = gf.collect(args)
            self.assertEqual(set(r["medians_s"]), {"guest/local-disks/set", "activate/local-disks/cached"})
            self.assertAlmostEqual(r["medians_s"]["guest/local-disks/set"], 0.0011)
            self.assertEqual(r["component_bytes"], {"local-disks": 1000})
            self.assertEqual(r["once_s"]["local-disks"]["cold-tiered"], 1.5)

    def test_no_results_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            args = gf.argparse.Namespace(log=os.devnull, criterion=d, components=d, date="", commit="", load="")
            with self.assertRaisesRegex(gf.Error, "no criterion results"):
                gf.collect(args)


class Tables(unittest.TestCase):
    RESULT = {
        "date": "2026-11-29T16:00Z", "commit": "abc", "load": "1.0 1.2",
        "medians_s": {"guest/local-disks/set": 0.0011, "guest/local-disks/set-reuse": 0.0004,
                      "guest/local-disks/set-winch": 0.002, "activate/local-disks/cached": 0.05},
        "once_s": {"local-disks": {"cold-cranelift": 4.25, "cold-tiered": 1.5}},
        "component_bytes": {"local-disks": 4_100_000},
    }

    def test_a_row_per_measured_guest_with_what_was_not_measured_said(self):
        t = gf.table("bench/guests/x.json", self.RESULT)
        self.assertIn("| `local-disks` | Go, the SDK's types | 4.1 MB | 1.10 ms | **0.40 ms** | 2.00 ms | 50.00 ms | 4.25 s / 1.50 s |", t)
        self.assertNotIn("k8s-types", t)
        self.assertIn("commit `abc`, load 1.0 1.2", t)

    def test_write_fills_both_files_and_check_then_passes(self):
        with tempfile.TemporaryDirectory() as d:
            cwd = os.getcwd()
            os.chdir(d)
            try:
                os.makedirs("docs")
                os.makedirs("bench/guests")
                for p in ("README.md", "docs/benchmarks.md"):
                    with open(p, "w") as f:
                        f.write(f"a\n{gf.BEGIN}\nold\n{gf.END}\nb\n")
                with open("bench/guests/2026-11-29T1600.json", "w") as f:
                    json.dump(self.RESULT, f)
                check = gf.argparse.Namespace(check=True, results="bench/guests")
                with self.assertRaisesRegex(gf.Error, "README.md, docs/benchmarks.md"):
                    gf.write(check)
                gf.write(gf.argparse.Namespace(check=False, results="bench/guests"))
                gf.write(check)
                self.assertIn("**0.40 ms**", gf.read("README.md"))
            finally:
                os.chdir(cwd)


if __name__ == "__main__":
    unittest.main()

"""Tests of scripts/npd-figures.py: the NPD side-by-side table is what the
raw result says, every difference between the tools is listed with its
reason (or as not explained), and only the lines between the markers are
rewritten."""

import copy
import importlib.util
import json
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("npd_figures", os.path.join(HERE, "npd-figures.py"))
nf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nf)


def ev(reason, message, latency=0.3, type_="Warning", source="x"):
    return {"type": type_, "reason": reason, "message": message, "count": 1, "source": source, "latency_s": latency}


def phase(npd_cpu, ns_cpu, wall=60.0):
    def one(cpu):
        return {"cpu_s": cpu, "core_share": cpu / wall, "rss_mb_first": 20.0, "rss_mb_max": 22.5, "rss_mb_last": 21.0}

    return {"wall_s": wall, "npd": one(npd_cpu), "nodestatus": one(ns_cpu)}


def result(npd_latency_seen=100):
    """A run in which both tools agree everywhere."""
    perm_msg = 'Node condition KernelDeadlock is now: True, reason: DockerHung, message: "task docker:1 blocked"'
    cond = {"status": "True", "reason": "DockerHung", "message": "task docker:1 blocked"}
    compare = [
        {
            "rule": 1, "type": "temporary", "reason": "TaskHung", "text": "task a:1 blocked",
            "tools": {t: {"events": [ev("TaskHung", "task a:1 blocked", source=s)]} for t, s in [("npd", "kernel-monitor"), ("nodestatus", "nodestatus")]},
        },
        {
            "rule": 13, "type": "permanent", "reason": "DockerHung", "text": "task docker:1 blocked",
            "tools": {
                t: {
                    "events": [ev("DockerHung", perm_msg, 0.9, source=s), ev("TaskHung", "task docker:1 blocked", source=s)],
                    "condition": "KernelDeadlock",
                    "condition_latency_s": 0.8,
                    "condition_last": dict(cond),
                }
                for t, s in [("npd", "kernel-monitor"), ("nodestatus", "nodestatus")]
            },
        },
    ]
    final = [{"type": "KernelDeadlock", "status": "True", "reason": "DockerHung", "message": "task docker:1 blocked"}]
    return {
        "date": "2026-11-29 15:40 UTC", "load_start": "1.00 1.00 1.00 1/100 1", "load_end": "2.00 1.00 1.00 1/100 1",
        "run": "123456",
        "nodestatus": {"commit": "abc1234", "profile": "release"},
        "npd": {"commit": "6632ca67148f"},
        "idle": phase(0.3, 0.1, 30.0),
        "compare": compare,
        "latency": {
            "messages": 100,
            "npd": {"seen": npd_latency_seen, "p50_s": 0.5, "p99_s": 1.2, "max_s": 1.3},
            "nodestatus": {"seen": 100, "p50_s": 0.2, "p99_s": 0.4, "max_s": 0.45},
        },
        "flood": dict(phase(12.0, 0.6), rate=10000, lines_written=600000, seconds=60.2),
        "after_flood": {"npd": 0.7, "nodestatus": 0.25},
        "conditions_final": {"npd": copy.deepcopy(final), "nodestatus": copy.deepcopy(final)},
    }


class NpdFigures(unittest.TestCase):
    def test_the_table_says_what_the_result_says(self):
        t = nf.table(result(), "bench/npd/x.json")
        row = {l.split("|")[1].strip(): l for l in t.splitlines() if l.startswith("| ")}
        self.assertIn("500 ms / 1200 ms / 1300 ms (100 of 100 seen)", row["kernel line to its Event (TaskHung), p50 / p99 / max"])
        self.assertIn("200 ms / 400 ms / 450 ms (100 of 100 seen)", row["kernel line to its Event (TaskHung), p50 / p99 / max"])
        self.assertIn("KernelDeadlock 800 ms", row["kernel line to the condition (each permanent rule, once)"])
        self.assertIn("DockerHung 900 ms", row["kernel line to the condition's change Event"])
        flood = [l for k, l in row.items() if k.startswith("flood of 10,000")][0]
        self.assertIn("20.00 % of a core (12.00 CPU-s in 60 s)", flood)
        self.assertIn("1.00 % of a core (0.60 CPU-s in 60 s)", flood)
        self.assertIn("2 of 2", row["lines of the compare phase (one per rule) whose events and condition agree"])
        self.assertIn("abc1234 (release build)", t)
        self.assertIn("6632ca67148f", t)
        self.assertIn("2026-11-29 15:40 UTC", t)
        self.assertNotIn("debug build", t)

    def test_the_slowest_latencies_are_shown_with_the_gap_before_them(self):
        r = result()
        r["nodestatus"]["built"] = "2026-11-29 13:30 UTC"
        r["latency"]["gap_s"] = [None, 1.4, 0.55, 1.2, 0.9, 0.6, 1.0]
        r["latency"]["nodestatus"]["per_message_s"] = [0.02, 0.03, 0.7, 0.02, 0.04, 0.5, None]
        r["latency"]["npd"]["per_message_s"] = [0.01, None, 0.03, 0.02, None, None, None]
        t = nf.table(r, "x")
        self.assertIn("| the same, over the lines whose Event both sent: p50 / max | 20 ms / 30 ms (3 lines) | 20 ms / 700 ms (3 lines) |", t)
        self.assertIn("five slowest Events (700 ms after a gap of 0.55 s, 500 ms after a gap of 0.60 s, 40 ms after a gap of 0.90 s, 30 ms after a gap of 1.40 s, 20 ms after a gap of 1.20 s)", t)
        self.assertIn("the newest commit before the binary was built at 2026-11-29 13:30 UTC", t)
        self.assertIn("once a second (`updatePeriod`)", t)

    def test_a_debug_binary_is_said(self):
        r = result()
        r["nodestatus"]["profile"] = "debug"
        self.assertIn("**The nodestatus binary was a debug build**", nf.table(r, "x"))

    def test_only_the_source_differs_in_a_run_that_agrees(self):
        d = nf.differences(result())
        self.assertEqual(len(d), 1, d)
        self.assertIn("source.component", d[0])
        self.assertIn("kernel-monitor", d[0])

    def test_npds_combined_events_and_its_spent_budget_are_explained(self):
        r = result(npd_latency_seen=24)
        row = r["compare"][0]["tools"]["npd"]
        row["events"][0]["message"] = nf.COMBINED + row["events"][0]["message"]
        r["compare"][1]["tools"]["npd"]["events"] = []
        r["after_flood"]["npd"] = None
        r["npd"]["matches_logged"] = 103
        d = "\n".join(nf.differences(r))
        self.assertIn("after the flood: NPD sent no Event, its spam filter's 25 spent", d)
        self.assertIn("folds the events of one reason", d)
        self.assertIn("NPD sent no event: client-go's spam filter", d)
        self.assertIn("Events reached the apiserver for 24 of 100", d)
        self.assertIn("its log has 103 matches", d)
        self.assertNotIn("not explained", d)
        t = nf.table(r, "x")
        self.assertIn("1 of 2", t, "the combined event agrees once its prefix is off; the spam-filtered one does not")

    def test_an_unknown_difference_is_flagged_not_explained(self):
        r = result()
        r["compare"][0]["tools"]["npd"]["events"][0]["message"] = "something else"
        r["compare"][1]["tools"]["nodestatus"]["condition_last"]["message"] = "other"
        r["conditions_final"]["npd"][0]["status"] = "False"
        d = nf.differences(r)
        flagged = [x for x in d if "not explained" in x]
        self.assertEqual(len(flagged), 3, d)
        self.assertTrue(any("rule 1 (temporary TaskHung): events differ" in x for x in flagged))
        self.assertTrue(any("condition KernelDeadlock differs" in x for x in flagged))
        self.assertTrue(any("conditions at the end differ" in x for x in flagged))

    def test_fewer_npd_events_without_a_spent_budget_are_not_explained(self):
        r = result(npd_latency_seen=5)
        r["compare"] = r["compare"][:1]
        d = "\n".join(nf.differences(r))
        self.assertIn("NPD's Events seen for 5 of 100, nodestatus's for 100, not explained", d)

    def test_only_the_lines_between_the_markers_are_rewritten(self):
        doc = f"# B\n\n## Reacting plugins: x\n\ntext\n\n## WIT 0.2\n\nmore\n"
        once = nf.rewrite(doc, "TABLE 1")
        self.assertIn(f"text\n\n{nf.SECTION}\n", once, "the section follows Reacting plugins")
        self.assertLess(once.index(nf.SECTION), once.index("## WIT 0.2"))
        self.assertIn(f"{nf.BEGIN}\nTABLE 1\n{nf.END}\n", once)
        twice = nf.rewrite(once, "TABLE 2")
        self.assertEqual(twice, once.replace("TABLE 1", "TABLE 2"))
        with self.assertRaises(nf.Error):
            nf.rewrite(once + nf.BEGIN, "x")

    def test_a_file_that_is_not_a_result_is_refused_naming_what_lacks(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            r = result()
            del r["flood"]
            json.dump(r, f)
        with self.assertRaises(nf.Error) as e:
            nf.load(f.name)
        self.assertIn("no 'flood'", str(e.exception))
        with open(f.name, "w") as g:
            g.write("{")
        with self.assertRaises(nf.Error):
            nf.load(f.name)


if __name__ == "__main__":
    unittest.main()

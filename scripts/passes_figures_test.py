"""Tests of passes-figures.py: the raw result it reads, the table it writes."""

import importlib.util
import json
import tempfile
import unittest
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "passes_figures", Path(__file__).resolve().parent / "passes-figures.py")
pf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pf)


def criterion(root, medians):
    for name, ns in medians.items():
        d = Path(root) / "pass_default" / name / "new"
        d.mkdir(parents=True)
        (d / "benchmark.json").write_text(json.dumps({"full_id": pf.GROUP + name}))
        (d / "estimates.json").write_text(json.dumps({"median": {"point_estimate": ns}}))


class Args:
    pass


class PassesFigures(unittest.TestCase):
    def run_collect(self, medians, log):
        with tempfile.TemporaryDirectory() as t:
            criterion(t, medians)
            (Path(t) / "log").write_text(log)
            a = Args()
            a.criterion, a.log = t, str(Path(t) / "log")
            a.date, a.commit, a.load = "2026-11-29T19:00Z", "abc", "0.5 0.7"
            return pf.collect(a)

    def test_collect_reads_every_row_and_the_called_setters(self):
        medians = {row: 1e6 * (i + 1) for i, (row, _) in enumerate(pf.ROWS)}
        r = self.run_collect(medians, 'x\nincremental: called ["machine-info", "memory-pressure"]\n')
        self.assertEqual(r["incremental_called"], ["machine-info", "memory-pressure"])
        self.assertEqual(r["medians_ns"]["native"], medians["native"])
        table = pf.table(pf.ROOT / "bench/passes/x.json", r)
        self.assertIn("| `wasm-incremental` |", table)
        self.assertIn("`machine-info`, `memory-pressure`", table)
        # the ratio is of two medians of the same run
        self.assertIn(f"{medians['wasm'] / medians['native']:.2f}x", table)

    def test_a_missing_row_or_line_is_an_error(self):
        medians = {row: 1e6 for row, _ in pf.ROWS if row != "native"}
        with self.assertRaises(pf.Error):
            self.run_collect(medians, "incremental: called []\n")
        full = {row: 1e6 for row, _ in pf.ROWS}
        with self.assertRaises(pf.Error):
            self.run_collect(full, "no line\n")
        self.assertEqual(self.run_collect(full, "incremental: called []\n")["incremental_called"], [])


if __name__ == "__main__":
    unittest.main()

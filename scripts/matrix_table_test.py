"""Tests of scripts/matrix-table.py: the README's version table is what the
results file says, the latest run of each release and suite."""

import importlib.util
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("matrix_table", os.path.join(HERE, "matrix-table.py"))
mt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mt)

HEADER = "\t".join(mt.COLUMNS) + "\n"


def results(*rows):
    f = tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False)
    f.write(HEADER + "".join("\t".join(r) + "\n" for r in rows))
    f.close()
    return f.name


def row(release, suite, result, passed, failed, date, note="", commit="abc123"):
    return [release, suite, result, str(passed), str(failed), "60", date, commit, "1.5", note]


class MatrixTable(unittest.TestCase):
    def test_the_latest_run_of_each_suite_is_shown_and_a_release_never_run_says_so(self):
        path = results(
            row("1.36.3", "api", "failed", 40, 2, "2026-11-29T11:00Z", "test kube::x ... FAILED"),
            row("1.36.3", "api", "passed", 42, 0, "2026-11-29T12:00Z", commit="old456"),
            row("1.36.3", "realnode", "skipped", 0, 0, "2026-11-29T12:05Z", "needs root"),
            row("1.37.2", "faults", "failed", 14, 1, "2026-11-29T12:10Z", "a|b"),
        )
        t = mt.table(mt.read_results(path))
        line = {l.split("|")[1].strip(): l for l in t.splitlines()[2:]}
        self.assertIn("passed (42 tests)", line["1.36.3"])
        self.assertNotIn("FAILED", line["1.36.3"])
        self.assertIn("skipped (needs root)", line["1.36.3"])
        self.assertIn("not run", line["1.36.3"], "the fault rig never ran on it")
        self.assertIn("2026-11-29T12:05Z", line["1.36.3"])
        self.assertIn("**failed**: 1 of 15 tests (a\\|b)", line["1.37.2"])
        self.assertIn("; api at `old456`", line["1.36.3"], "a suite of another commit says so")
        self.assertTrue(line["1.32.13"].endswith("| never |"))
        self.assertEqual(len(line), len(mt.RELEASES))

    def test_a_bad_file_is_refused_with_its_line(self):
        for bad, want in [
            (row("1.99.0", "api", "passed", 1, 0, "d"), "not in the matrix"),
            (row("1.37.2", "api", "ok", 1, 0, "d"), "result 'ok'"),
            (row("1.37.2", "e2e", "passed", 1, 0, "d"), "unknown suite"),
            (["1.37.2", "api"], "2 fields"),
        ]:
            with self.assertRaises(mt.Error) as e:
                mt.read_results(results(bad))
            self.assertIn(want, str(e.exception))
            self.assertIn(":2:", str(e.exception))

    def test_only_the_lines_between_the_markers_are_rewritten(self):
        readme = f"# x\n\n{mt.BEGIN}\nold table\n{mt.END}\n\nafter\n"
        new = mt.render(readme, {})
        self.assertTrue(new.startswith(f"# x\n\n{mt.BEGIN}\n| Kubernetes |"))
        self.assertTrue(new.endswith(f"{mt.END}\n\nafter\n"))
        self.assertNotIn("old table", new)
        with self.assertRaises(mt.Error):
            mt.render("no markers", {})


if __name__ == "__main__":
    unittest.main()

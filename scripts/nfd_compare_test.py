"""Tests of scripts/nfd-compare.py: nfd-worker's log parsed as klog writes
it, the diff's reasons, and the table kept in step with the raw results."""
import importlib.util
import os
import tempfile
import unittest

spec = importlib.util.spec_from_file_location(
    "nfd_compare", os.path.join(os.path.dirname(__file__), "nfd-compare.py")
)
nc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nc)

# As nfd-worker -v=1 writes it (klog's InfoS with a multi-line value).
LOG = """I1129 15:20:01.000000  100 nfd-worker.go:772] "starting feature discovery..."
I1129 15:20:01.100000  100 nfd-worker.go:783] "feature discovery completed" labels=<
\tfeature.node.kubernetes.io/cpu-model.family: "6"
\tfeature.node.kubernetes.io/kernel-version.full: 6.1.0-18-amd64
\tfeature.node.kubernetes.io/system-os_release.ID: debian
\tvendor.io/it's: 'a ''quoted'' one'
 >
I1129 15:20:01.200000  100 nfd-worker.go:520] "oneshot"
"""


class NfdLog(unittest.TestCase):
    def test_the_labels_dump_is_read_with_yaml_quoting(self):
        self.assertEqual(
            nc.nfd_log_labels(LOG),
            {
                "feature.node.kubernetes.io/cpu-model.family": "6",
                "feature.node.kubernetes.io/kernel-version.full": "6.1.0-18-amd64",
                "feature.node.kubernetes.io/system-os_release.ID": "debian",
                "vendor.io/it's": "a 'quoted' one",
            },
        )

    def test_an_empty_dump_is_no_labels(self):
        log = '"feature discovery completed" labels=<\n\t{}\n >\n'
        self.assertEqual(nc.nfd_log_labels(log), {})

    def test_a_log_without_labels_or_unfinished_is_refused(self):
        with self.assertRaisesRegex(nc.Error, "-v=1"):
            nc.nfd_log_labels('"feature discovery completed"\n')
        with self.assertRaisesRegex(nc.Error, "no end"):
            nc.nfd_log_labels('"feature discovery completed" labels=<\n\ta: b\n')


class Master(unittest.TestCase):
    def test_unprefixed_names_get_nfds_prefix_and_a_prefixed_one_wins(self):
        self.assertEqual(
            nc.as_nfd_master_writes({
                "gpu-count": "2",
                "vendor.io/x": "y",
                "dup": "unprefixed",
                "feature.node.kubernetes.io/dup": "prefixed",
            }),
            {
                "feature.node.kubernetes.io/gpu-count": "2",
                "vendor.io/x": "y",
                "feature.node.kubernetes.io/dup": "prefixed",
            },
        )


class Diff(unittest.TestCase):
    def test_every_difference_has_a_row_and_its_reason_or_none_known(self):
        nfd = {"f/cpu-cpuid.AVX": "true", "f/a": "1", "f/b": "2", "f/same": "x"}
        ns = {"f/a": "1", "f/b": "3", "f/same": "x", "f/extra": "true"}
        rules = [("only-nfd", "f/cpu-cpuid.*", "no CPUID"), ("value", "f/b", "rounding")]
        self.assertEqual(
            nc.diff(nfd, ns, rules),
            [
                ("value", "f/b", "2", "3", "rounding"),
                ("only-nfd", "f/cpu-cpuid.AVX", "true", "", "no CPUID"),
                ("only-nodestatus", "f/extra", "", "true", nc.NO_REASON),
            ],
        )

    def test_a_reason_applies_only_to_its_kind(self):
        rows = nc.diff({}, {"f/cpu-cpuid.X": "true"}, [("only-nfd", "f/cpu-cpuid.*", "no CPUID")])
        self.assertEqual(rows[0][4], nc.NO_REASON)

    def test_the_kubelets_labels_are_not_the_setters(self):
        node = {"metadata": {"labels": {
            "kubernetes.io/hostname": "n", "beta.kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "x",
            "feature.node.kubernetes.io/pci-0300_1af4.present": "true", "vendor.io/x": "y"}}}
        self.assertEqual(nc.node_labels(node), {
            "feature.node.kubernetes.io/pci-0300_1af4.present": "true", "vendor.io/x": "y"})


class Table(unittest.TestCase):
    def results(self, d, ns_value):
        with open(os.path.join(d, "meta.tsv"), "w") as f:
            f.write("date\t2026-11-29T15:20Z\nnodestatus\tabc\nnfd-worker\tv0.18 (123)\nkernel\t6.1\nload\t0.5\n")
        with open(os.path.join(d, "default.nfd.txt"), "w") as f:
            f.write("f/a=1\nf/b=2\n")
        with open(os.path.join(d, "default.nodestatus.txt"), "w") as f:
            f.write(f"f/a=1\nf/b={ns_value}\n")
        rows = nc.diff(nc.read_labels(os.path.join(d, "default.nfd.txt")),
                       nc.read_labels(os.path.join(d, "default.nodestatus.txt")), [])
        with open(os.path.join(d, "default.diff.tsv"), "w") as f:
            f.write("kind\tlabel\tnfd-worker\tnodestatus\treason\n")
            f.write("".join("\t".join(r) + "\n" for r in rows))

    def test_the_table_counts_and_lists_what_the_results_hold(self):
        with tempfile.TemporaryDirectory() as d:
            self.results(d, "3")
            t = nc.table(d)
            self.assertIn("| default | 2 | 1 | 1 | 1 |", t)
            self.assertIn("| default | value | `f/b` | `2` | `3` | no reason known |", t)
            self.assertIn("2026-11-29T15:20Z", t)

    def test_many_differences_of_one_reason_are_one_row(self):
        rows = [("only-nfd", f"f/cpu-cpuid.F{i}", "true", "", "no CPUID") for i in range(5)]
        rows.append(("value", "f/b", "2", "3", "rounding"))
        self.assertEqual(
            nc.detail_rows("c", rows),
            [
                "| c | only-nfd | `f/cpu-cpuid.F0`, `f/cpu-cpuid.F1` and 3 more (c.diff.tsv) | | | no CPUID |",
                "| c | value | `f/b` | `2` | `3` | rounding |",
            ],
        )

    def test_check_fails_when_the_doc_is_not_what_the_results_give(self):
        with tempfile.TemporaryDirectory() as d:
            self.results(d, "2")
            doc = os.path.join(d, "doc.md")
            with open(doc, "w") as f:
                f.write(f"x\n{nc.BEGIN}\nold\n{nc.END}\ny\n")
            with self.assertRaisesRegex(nc.Error, "not what"):
                nc.main(["", "table", d, "--check", doc])
            nc.main(["", "table", d, "--write", doc])
            nc.main(["", "table", d, "--check", doc])
            text = nc.read(doc)
            self.assertTrue(text.startswith("x\n") and text.endswith("y\n"))
            self.assertIn("| default | 2 | 2 | 0 | 0 |", text)


if __name__ == "__main__":
    unittest.main()

"""Unit tests of cpu-features on fixture /proc/cpuinfo files; they run natively:

    PYTHONPATH=../../../sdk/python python3 -m unittest -v
"""

import json
import os
import sys
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import nodestatus  # noqa: F401  (on PYTHONPATH, or copied next to app.py)
except ImportError:  # in the repository: sdk/python
    sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "sdk", "python"))

import app  # noqa: E402
from nodestatus import Error, Node, host  # noqa: E402

P = "feature.node.kubernetes.io/cpu-"


def fixture(name: str) -> str:
    with open(os.path.join(HERE, "fixtures", name), encoding="utf-8") as f:
        return f.read()


def cpuid(labels):
    return sorted(k[len(P + "cpuid."):] for k in labels if k.startswith(P + "cpuid."))


class ParseTest(unittest.TestCase):
    def test_amd_epyc_vm(self):
        info = app.parse(fixture("cpuinfo-amd-epyc-vm.txt"))
        got = app.labels(info)
        self.assertEqual(
            cpuid(got),
            ["ADX", "AESNI", "AVX", "AVX2", "FMA3", "HYPERVISOR", "SHA", "SSE4", "SSE42", "VAES", "VPCLMULQDQ"],
        )
        self.assertEqual(got[P + "model.vendor_id"], "AMD")
        self.assertEqual(got[P + "model.family"], "25")
        self.assertEqual(got[P + "model.id"], "1")
        self.assertEqual(got[P + "hardware_multithreading"], "false")  # siblings 2, cpu cores 2
        self.assertTrue(all(v == "true" for k, v in got.items() if k.startswith(P + "cpuid.")))

    def test_intel_sapphire_rapids(self):
        got = app.labels(app.parse(fixture("cpuinfo-intel-xeon-8480.txt")))
        ids = cpuid(got)
        for name in ["AMXTILE", "AMXBF16", "AMXINT8", "AVX512F", "AVX512BW", "AVX512VL", "AVX512VNNI",
                     "AVX512FP16", "AVX512BF16", "AVXVNNI", "AESNI", "SSE42", "VMX", "GFNI", "SHA"]:
            self.assertIn(name, ids)
        self.assertNotIn("HYPERVISOR", ids)  # bare metal
        self.assertNotIn("SVM", ids)
        self.assertEqual(got[P + "model.vendor_id"], "Intel")
        self.assertEqual(got[P + "model.family"], "6")
        self.assertEqual(got[P + "model.id"], "143")
        self.assertEqual(got[P + "hardware_multithreading"], "true")  # 112 siblings, 56 cores

    def test_arm64_has_features_not_flags(self):
        info = app.parse(fixture("cpuinfo-arm64-neoverse-n1.txt"))
        self.assertEqual(info.arch, "arm")
        got = app.labels(info)
        self.assertEqual(
            cpuid(got),
            ["AES", "ASIMD", "ASIMDDP", "ASIMDHP", "ATOMICS", "CRC32", "FPHP", "PMULL", "SHA1", "SHA2"],
        )
        self.assertEqual(got[P + "model.vendor_id"], "ARM")
        self.assertEqual(got[P + "model.family"], str(0x3F))  # variant 0x3, architecture 0xf
        self.assertEqual(got[P + "model.id"], str(0xD0C1))  # part 0xd0c, revision 1
        self.assertNotIn(P + "hardware_multithreading", got)

    def test_unknown_cpuinfo_is_an_error(self):
        for text in ["", "processor : 0\ncpu : POWER9 (raw), altivec supported\n"]:
            with self.assertRaises(Error) as e:
                app.parse(text)
            self.assertIn("lists no CPU flags", str(e.exception))

    def test_unknown_vendor_is_kept_as_a_valid_value(self):
        info = app.parse("vendor_id : Weird/Vendor!\nflags : avx\n")
        self.assertEqual(info.vendor, "Weird_Vendor")
        info = app.parse("Features : fp asimd\nCPU implementer : 0x48\nCPU variant : 0x1\nCPU part : 0xd01\nCPU revision : 0\n")
        self.assertEqual(info.vendor, "0x48")


class ConfigTest(unittest.TestCase):
    def setUp(self):
        self.info = app.parse(fixture("cpuinfo-amd-epyc-vm.txt"))

    def test_allow_list(self):
        got = app.labels(self.info, {"flags": ["AVX2", "AVX512F"]})
        self.assertEqual(cpuid(got), ["AVX2"])

    def test_everything_but(self):
        got = app.labels(self.info, {"flags": ["*"], "exclude": ["HYPERVISOR"]})
        ids = cpuid(got)
        for name in ["X87", "CMPXCHG8", "SSE3", "CLMUL", "LAHF", "LZCNT", "SSE4A", "CLZERO", "XSAVE", "AVX2"]:
            self.assertIn(name, ids)
        self.assertNotIn("HYPERVISOR", ids)
        self.assertIn("3DNOWPREFETCH", ids)

    def test_bad_config(self):
        for cfg in [{"flags": "AVX2"}, {"exclude": [1]}]:
            with self.assertRaises(Error) as e:
                app.labels(self.info, cfg)
            self.assertIn("invalid config", str(e.exception))


class SetterTest(unittest.TestCase):
    def tearDown(self):
        host.set_native_config({})

    def run_setter(self, node: Node, cpuinfo: str) -> Node:
        """The node as the host has it after merging the setter's part."""
        with mock.patch.object(app, "read_cpuinfo", return_value=cpuinfo):
            return nodestatus.apply(app.Setter, node)

    def test_metadata(self):
        m = app.Setter().metadata()
        self.assertEqual(m.name, "cpu-features")
        self.assertEqual(m.paths, ["/proc"])

    def test_sets_labels_and_removes_stale_ones(self):
        node = Node.named("n")
        node.set_label(P + "cpuid.AVX512F", "true")  # a flag this CPU does not have
        node.set_label(P + "pstate.status", "active")  # NFD's, not ours
        node.set_label("example.com/other", "x")
        out = self.run_setter(node, fixture("cpuinfo-amd-epyc-vm.txt"))
        labels = out.labels()
        self.assertNotIn(P + "cpuid.AVX512F", labels)
        self.assertEqual(labels[P + "cpuid.AVX2"], "true")
        self.assertEqual(labels[P + "pstate.status"], "active")
        self.assertEqual(labels["example.com/other"], "x")

        # Its part holds the labels it sets and the stale one it removes,
        # and no label of anyone else.
        with mock.patch.object(app, "read_cpuinfo", return_value=fixture("cpuinfo-amd-epyc-vm.txt")):
            part = json.loads(app.Setter().set(node.to_json()))
        self.assertEqual(list(part), ["metadata"])
        self.assertIsNone(part["metadata"]["labels"][P + "cpuid.AVX512F"])
        self.assertEqual(part["metadata"]["labels"][P + "cpuid.AVX2"], "true")
        self.assertTrue(all(k.startswith(app.MANAGED) for k in part["metadata"]["labels"]))

        # A second pass over its own output changes nothing.
        again = self.run_setter(out, fixture("cpuinfo-amd-epyc-vm.txt"))
        self.assertEqual(again.raw, out.raw)

        # A narrower config removes what no longer applies.
        host.set_native_config({"flags": ["AVX2"]})
        narrow = self.run_setter(out, fixture("cpuinfo-amd-epyc-vm.txt")).labels()
        self.assertEqual(cpuid(narrow), ["AVX2"])
        self.assertEqual(narrow[P + "model.vendor_id"], "AMD")

    def test_missing_or_ungranted_cpuinfo_is_a_clear_error(self):
        with self.assertRaises(Error) as e:
            app.read_cpuinfo("/does/not/exist/cpuinfo")
        self.assertEqual("cannot read /does/not/exist/cpuinfo: no such file or directory", str(e.exception))
        # Not granted (the fake host grants nothing): the error says which grant.
        nodestatus.fake_host(files={"/proc/cpuinfo": "processor: 0\n"}, paths=[])
        try:
            with self.assertRaises(Error) as e:
                app.read_cpuinfo()
        finally:
            nodestatus.clear_fake_host()
        self.assertIn("cannot read /proc/cpuinfo: not inside a directory granted", str(e.exception))
        self.assertIn("(plugins: {cpu-features: {paths: [/proc]}})", str(e.exception))

    def test_setter_error_is_the_message(self):
        with mock.patch.object(app, "read_cpuinfo", side_effect=Error("cannot read /proc/cpuinfo: nope")):
            with self.assertRaises(Error) as e:
                app.Setter().set(json.dumps({"metadata": {"name": "n"}}))
        self.assertEqual(str(e.exception), "cannot read /proc/cpuinfo: nope")


if __name__ == "__main__":
    unittest.main()

"""readonly-fs's tests, natively: PYTHONPATH=SDK python3 -m unittest -v"""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import nodestatus  # noqa: F401  (on PYTHONPATH, or copied next to app.py)
except ImportError:  # in the repository: sdk/python
    sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "sdk", "python"))

import app  # noqa: E402
import nodestatus  # noqa: E402
from nodestatus import Lines  # noqa: E402

NODE = json.dumps({"metadata": {"name": "n1"}, "status": {}})
LINE = "EXT4-fs (sda1): Remounting filesystem read-only"


class ReadonlyFsTest(unittest.TestCase):
    def tearDown(self):
        nodestatus.clear_fake_host()

    def test_a_read_only_remount_makes_the_condition_true_with_an_event(self):
        fake = nodestatus.fake_host()
        (c,) = json.loads(app.Setter().set(NODE))["status"]["conditions"]
        self.assertEqual((c["status"], c["reason"]), ("False", "FilesystemIsNotReadOnly"))
        (c,) = json.loads(app.Reactor().on_lines(NODE, Lines.of("kernel", 0, LINE)))["status"]["conditions"]
        self.assertEqual((c["status"], c["message"]), ("True", LINE))
        self.assertEqual([(e.reason, e.message) for e in fake.events], [("ReadonlyFilesystem", LINE)])

    def test_it_follows_the_kernel_log_with_the_configs_pattern(self):
        nodestatus.fake_host()
        (s,) = app.Reactor().subscribe().streams
        self.assertEqual((s.name, s.source, s.patterns), ("kernel", "kmsg", ["Remounting filesystem read-only"]))
        nodestatus.fake_host(config={"pattern": "read-only"})
        self.assertEqual(app.Reactor().subscribe().streams[0].patterns, ["read-only"])


if __name__ == "__main__":
    unittest.main()

"""Unit tests of {{name}}, natively: PYTHONPATH={{kit}}/sdk/python python3 -m unittest -v"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import nodestatus  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "{{kit}}", "sdk", "python"))

import app  # noqa: E402
import nodestatus  # noqa: E402
from nodestatus import Node  # noqa: E402


class Test(unittest.TestCase):
    def test_major_minor(self) -> None:
        self.assertEqual(app.major_minor("6.1.0-18-amd64"), "6.1")
        self.assertIsNone(app.major_minor("linux"))

    def test_labels_the_node(self) -> None:
        # set() returns the setter's part: only the fields it sets.
        part = Node.parse(app.Setter().set(Node.named("n").to_json()))
        self.assertEqual(list(part.labels()), [app.LABEL])
        # nodestatus.apply: the node as the engine has it after the merge.
        out = nodestatus.apply(app.Setter, Node.named("n"))
        self.assertEqual(out.name, "n")
        self.assertIsNotNone(out.label(app.LABEL))


if __name__ == "__main__":
    unittest.main()

"""The shared conformance vectors in sdk/conformance/ (quantities, the
condition rules, RFC 3339 times, the part a 0.2 setter returns), which the
Rust, JS and C SDKs run too."""

import json
import os
import unittest

from nodestatus import ConditionStatus, Node, Quantity, run, rfc3339

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance")


def vectors(name):
    with open(os.path.join(VECTORS, name), encoding="utf-8") as f:
        return json.load(f)


def node_with(conditions):
    status = {} if conditions is None else {"conditions": conditions}
    return Node.parse(json.dumps({"metadata": {"name": "n1"}, "status": status}))


class Quantities(unittest.TestCase):
    v = vectors("quantity.json")

    def test_parse(self):
        self.assertTrue(self.v["parse"])
        for case in self.v["parse"]:
            with self.subTest(input=case["input"]):
                q = Quantity.parse(case["input"])
                self.assertEqual(
                    (q.as_millis(), q.format, str(q)),
                    (int(case["millis"]), case["format"], case["canonical"]),
                )

    def test_invalid(self):
        self.assertTrue(self.v["invalid"])
        for case in self.v["invalid"]:
            with self.subTest(input=case["input"]):
                with self.assertRaises(Exception):
                    Quantity.parse(case["input"])

    def test_format(self):
        self.assertTrue(self.v["format"])
        for case in self.v["format"]:
            with self.subTest(millis=case["millis"], format=case["format"]):
                self.assertEqual(str(Quantity(int(case["millis"]), case["format"])), case["canonical"])

    def test_arithmetic(self):
        self.assertTrue(self.v["arithmetic"])
        for case in self.v["arithmetic"]:
            with self.subTest(a=case["a"], b=case["b"]):
                a, b = Quantity.parse(case["a"]), Quantity.parse(case["b"])
                self.assertEqual((str(a.add(b)), str(a.saturating_sub(b))), (case["add"], case["saturating_sub"]))

    def test_units_ceil(self):
        self.assertTrue(self.v["units_ceil"])
        for case in self.v["units_ceil"]:
            with self.subTest(input=case["input"]):
                self.assertEqual(Quantity.parse(case["input"]).as_units_ceil(), int(case["units_ceil"]))


class Conditions(unittest.TestCase):
    v = vectors("condition.json")

    def test_set(self):
        self.assertTrue(self.v["set"])
        for case in self.v["set"]:
            with self.subTest(case["name"]):
                node = node_with(case["conditions"])
                s = case["set"]
                t = node.set_condition(s["type"], s["status"], s["reason"], s["message"], now=s["now"])
                self.assertEqual(json.loads(node.to_json())["status"].get("conditions"), case["want"])
                got = {
                    "previous": None if t.previous is None else t.previous.value,
                    "current": t.current.value,
                    "flipped": t.flipped,
                }
                self.assertEqual(got, case["transition"])
                self.assertIsInstance(t.current, ConditionStatus)

    def test_remove(self):
        self.assertTrue(self.v["remove"])
        for case in self.v["remove"]:
            with self.subTest(case["name"]):
                node = node_with(case["conditions"])
                removed = node.remove_condition(case["remove"])
                self.assertEqual(removed, case["removed"])
                self.assertEqual(json.loads(node.to_json())["status"].get("conditions"), case["want"])


def apply_op(node, op):
    name, *args = op
    if name == "set_addresses":
        node.set_addresses([tuple(a) for a in args[0]])
    elif name == "set_node_info":
        node.set_node_info(*args)
    else:
        getattr(node, name)(*args)


def comparable(part):
    """A part as the vectors compare it: conditions on type, status, reason
    and message (and $patch), an empty reason or message as absent."""
    part = json.loads(json.dumps(part))
    for c in part.get("status", {}).get("conditions", []):
        for k in list(c):
            if k not in ("type", "status", "reason", "message", "$patch") or c[k] == "" and k != "type":
                del c[k]
    return part


class Parts(unittest.TestCase):
    v = vectors("part.json")

    def test_part(self):
        self.assertTrue(self.v["cases"])
        for case in self.v["cases"]:
            with self.subTest(case["name"]):
                # Through the node API, and through run(), which the
                # component's set export returns.
                node = Node.parse(json.dumps(self.v["node"]))
                for op in case["ops"]:
                    apply_op(node, op)
                self.assertEqual(comparable(node.part()), case["part"])
                text = run(lambda n: [apply_op(n, op) for op in case["ops"]], json.dumps(self.v["node"]))
                self.assertEqual(comparable(json.loads(text)), case["part"])


class Times(unittest.TestCase):
    def test_rfc3339(self):
        cases = vectors("time.json")["rfc3339"]
        self.assertTrue(cases)
        for case in cases:
            with self.subTest(seconds=case["seconds"]):
                self.assertEqual(rfc3339(case["seconds"]), case["rfc3339"])


if __name__ == "__main__":
    unittest.main()

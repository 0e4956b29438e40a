"""Unit tests of the Python SDK's reactor; they run natively:

    cd sdk/python && python3 -m unittest -v test_reactor
"""

import json
import unittest

import nodestatus
from nodestatus import ConditionStatus, Error, Lines, Metadata, Node, Stream, Subscriptions


class XidWatch(nodestatus.Plugin):
    def metadata(self) -> Metadata:
        return Metadata("xid-watch", "0.1.0")

    def set(self, node: Node) -> None:
        node.set_condition("GPUHealthy", ConditionStatus.TRUE, "NoXid")

    def subscribe(self) -> Subscriptions:
        return Subscriptions([Stream.kmsg("kernel", [r"NVRM: Xid"])], watch=["/etc/features.d"])

    def on_lines(self, node: Node, lines: Lines) -> None:
        self.set(node)  # the plugin's own set, on the Node
        if lines.dropped:
            raise Error(f"{lines.dropped} lines were dropped")
        for m in lines.matches:
            node.set_condition("GPUHealthy", ConditionStatus.FALSE, "Xid", f"{m.stream}: {m.text}")
            nodestatus.host.record_event("Warning", "GPUXid", m.text)


class Bad(nodestatus.Plugin):
    def subscribe(self):
        return Subscriptions([Stream("kernel", source="dmesg")])


NODE = json.dumps({"metadata": {"name": "n1"}, "status": {}})


class ReactorTest(unittest.TestCase):
    def setUp(self):
        self.fake = nodestatus.fake_host()

    def tearDown(self):
        nodestatus.clear_fake_host()

    def test_on_lines_gives_the_part_and_records_the_events(self):
        lines = Lines.of("kernel", 0, "NVRM: Xid (PCI:0000:17:00): 79", "NVRM: Xid (PCI:0000:17:00): 48")
        self.assertGreater(lines.matches[0].time_ms, 0)
        part = json.loads(XidWatch().on_lines(NODE, lines))
        (c,) = part["status"]["conditions"]
        self.assertEqual((c["status"], c["reason"]), ("False", "Xid"))
        self.assertEqual(c["message"], "kernel: NVRM: Xid (PCI:0000:17:00): 48")
        self.assertEqual([e.reason for e in self.fake.events], ["GPUXid", "GPUXid"])
        self.assertEqual(self.fake.events[0].message, "NVRM: Xid (PCI:0000:17:00): 79")
        # No lines: set's part.
        (c,) = json.loads(XidWatch().on_lines(NODE, Lines()))["status"]["conditions"]
        self.assertEqual((c["status"], c["reason"]), ("True", "NoXid"))
        # run_lines is the same, with a function.
        part = nodestatus.run_lines(lambda node, lines: node.set_label("example.com/n", str(len(lines.matches))),
                                    NODE, lines)
        self.assertEqual(json.loads(part), {"metadata": {"labels": {"example.com/n": "2"}}})

    def test_on_lines_errors_are_the_plugins(self):
        with self.assertRaisesRegex(Error, "^3 lines were dropped$"):
            XidWatch().on_lines(NODE, Lines(dropped=3))
        with self.assertRaisesRegex(Error, "does not parse"):
            XidWatch().on_lines("[", Lines())

    def test_subscribe_returns_what_the_plugin_follows(self):
        s = XidWatch().subscribe()
        self.assertEqual(s.streams[0].source, "kmsg")
        self.assertEqual((s.streams[0].span, s.streams[0].lookback_seconds), (1, 0))
        self.assertEqual(s.watch, ["/etc/features.d"])
        f = Stream.file("syslog", "/var/log/syslog", ["x"], span=3)
        self.assertEqual((f.source, f.path, f.span), ("file", "/var/log/syslog", 3))
        j = Stream.journal("units", ["containerd"], ["y"])
        self.assertEqual((j.source, j.units), ("journal", ["containerd"]))
        with self.assertRaisesRegex(ValueError, "source 'dmesg' is not kmsg, file or journal"):
            Bad().subscribe()


if __name__ == "__main__":
    unittest.main()

"""Unit tests of the Python SDK; they run natively:

    cd sdk/python && python3 -m unittest -v
"""

import json
import re
import unittest

import nodestatus
from nodestatus import (
    ConditionStatus,
    Error,
    Metadata,
    Node,
    Plugin,
    Quantity,
    host,
)

SAMPLE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"a": "1"}},
    "spec": {"taints": []},
    "status": {
        "images": [{"names": ["x"], "sizeBytes": 1}],
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "lastHeartbeatTime": "2020-01-01T00:00:00Z",
                "lastTransitionTime": "2020-01-01T00:00:00Z",
                "reason": "r",
                "message": "m",
            }
        ],
    },
}


def sample() -> Node:
    return Node.parse(json.dumps(SAMPLE))


class QuantityTest(unittest.TestCase):
    def test_parses_the_api_syntax(self):
        self.assertEqual(Quantity.parse("2").as_millis(), 2000)
        self.assertEqual(Quantity.parse("1500m").as_millis(), 1500)
        self.assertEqual(Quantity.parse("100Mi").as_millis(), 100 * 1024 * 1024 * 1000)
        self.assertEqual(Quantity.parse("1.5G").as_millis(), 1_500_000_000_000)
        self.assertEqual(Quantity.parse("1e3").as_millis(), 1_000_000)
        self.assertEqual(Quantity.parse("1E3").as_millis(), 1_000_000)
        self.assertEqual(Quantity.parse("2E").as_millis(), 2 * 10**18 * 1000)
        self.assertEqual(Quantity.parse("0.0001").as_millis(), 1)  # rounds up
        self.assertEqual(Quantity.parse("-1").as_millis(), -1000)
        self.assertEqual(Quantity.parse("+3k").as_millis(), 3_000_000)
        self.assertEqual(Quantity.parse(" 16Gi ").as_millis(), 16 * 2**30 * 1000)
        self.assertEqual(Quantity.parse("1Ei").as_millis(), 2**60 * 1000)
        self.assertEqual(Quantity.parse("500u").as_millis(), 1)
        self.assertEqual(Quantity.parse(".5").as_millis(), 500)
        self.assertEqual(Quantity.parse("100Mi").format, Quantity.BINARY_SI)
        self.assertEqual(Quantity.parse("100M").format, Quantity.DECIMAL_SI)
        for bad in ["", "x", "1X", "1.2.3", "--1", "Mi", "1e", "1e_3", "1 Gi", "1e99", "1Ki2", "٣"]:
            with self.assertRaises(Error, msg=bad):
                Quantity.parse(bad)

    def test_formats_canonically(self):
        self.assertEqual(str(Quantity.bytes(16 * 1024**3)), "16Gi")
        self.assertEqual(str(Quantity.bytes(32876232 * 1024)), "32876232Ki")
        self.assertEqual(str(Quantity.bytes(1000)), "1k")
        self.assertEqual(str(Quantity.units(110)), "110")
        self.assertEqual(str(Quantity.units(2000)), "2k")
        self.assertEqual(str(Quantity.units(-3000)), "-3k")
        self.assertEqual(str(Quantity.millis(1500)), "1500m")
        self.assertEqual(str(Quantity.bytes(0)), "0")
        self.assertEqual(str(Quantity.parse("1.5Gi")), "1536Mi")
        self.assertEqual(str(Quantity.parse("0.5")), "500m")
        for s in ["100Mi", "2", "1500m", "4Ti", "3M", "7"]:
            q = Quantity.parse(s)
            self.assertEqual(str(q), s)
            self.assertEqual(Quantity.parse(str(q)), q)

    def test_arithmetic(self):
        cap = Quantity.bytes(1 << 30)
        self.assertEqual(cap.saturating_sub(Quantity.parse("2Gi")).as_millis(), 0)
        self.assertEqual(str(cap.saturating_sub(Quantity.parse("512Mi"))), "512Mi")
        self.assertEqual(str(cap.add(Quantity.parse("1Gi"))), "2Gi")
        self.assertEqual(Quantity.parse("1500m").as_units_ceil(), 2)
        self.assertEqual(Quantity.parse("-1500m").as_units_ceil(), -1)
        self.assertLess(Quantity.parse("1Mi"), Quantity.parse("2Mi"))


class NodeTest(unittest.TestCase):
    def test_untouched_node_round_trips(self):
        n = sample()
        self.assertEqual(json.loads(n.to_json()), SAMPLE)
        self.assertEqual(n.name, "n1")

    def test_rejects_non_objects(self):
        for bad in ["[1]", '{"metadata": 3}', "{} trailing", "", '{"status": []}']:
            with self.assertRaises(Error, msg=bad):
                Node.parse(bad)

    def test_labels_and_annotations(self):
        n = sample()
        n.set_label("example.com/x", "y")
        self.assertEqual(n.label("example.com/x"), "y")
        self.assertEqual(n.labels(), {"a": "1", "example.com/x": "y"})
        self.assertTrue(n.remove_label("a"))
        self.assertFalse(n.remove_label("a"))
        with self.assertRaises(TypeError):
            n.set_label("example.com/bool", True)
        n.set_annotation("example.com/note", "hi")
        self.assertEqual(n.annotation("example.com/note"), "hi")
        self.assertEqual(n.annotations(), {"example.com/note": "hi"})
        self.assertTrue(n.remove_annotation("example.com/note"))
        self.assertFalse(n.remove_annotation("example.com/note"))
        self.assertIsNone(n.label("missing"))

    def test_setting_the_same_value_changes_nothing(self):
        n = Node.named("n")
        before = n.to_json()
        n.remove_label("x")
        n.remove_condition("X")
        n.remove_resource("x")
        self.assertEqual(n.to_json(), before)

    def test_resources_and_node_info(self):
        n = sample()
        n.set_capacity("example.com/dongle", Quantity.units(2))
        n.set_capacity("memory", Quantity.bytes(16 * 2**30))
        n.set_allocatable("memory", "15Gi")
        n.set_capacity("pods", 110)
        n.set_allocatable("cpu", "1000m")
        n.set_node_info("kernelVersion", "6.1")
        out = json.loads(n.to_json())
        self.assertEqual(
            out["status"]["capacity"],
            {"example.com/dongle": "2", "memory": "16Gi", "pods": "110"},
        )
        # Written canonically, as the API server writes them back (and as
        # the JavaScript SDK does).
        self.assertEqual(out["status"]["allocatable"], {"memory": "15Gi", "cpu": "1"})
        self.assertEqual(out["status"]["nodeInfo"]["kernelVersion"], "6.1")
        self.assertEqual(out["status"]["images"], SAMPLE["status"]["images"])
        self.assertEqual(n.capacity("memory"), Quantity.parse("16Gi"))
        self.assertEqual(n.allocatable("memory"), Quantity.parse("15Gi"))
        self.assertEqual(n.node_info("kernelVersion"), "6.1")
        with self.assertRaises(Error):
            n.set_capacity("cpu", "lots")
        self.assertTrue(n.remove_resource("memory"))
        self.assertIsNone(n.capacity("memory"))
        self.assertIsNone(n.allocatable("memory"))
        self.assertFalse(n.remove_resource("memory"))

    def test_addresses_and_status(self):
        n = Node.named("n")
        n.set_addresses([("InternalIP", "10.0.0.4"), ("Hostname", "n")])
        self.assertEqual(
            n.status("addresses"),
            [{"type": "InternalIP", "address": "10.0.0.4"}, {"type": "Hostname", "address": "n"}],
        )
        n.set_status("daemonEndpoints", {"kubeletEndpoint": {"Port": 10250}})
        self.assertTrue(n.remove_status("daemonEndpoints"))
        self.assertFalse(n.remove_status("daemonEndpoints"))

    def test_missing_sections_are_created(self):
        n = Node({"apiVersion": "v1", "kind": "Node"})
        n.set_label("example.com/a", "b")
        n.set_condition("X", True, "R", "m", now="2024-01-01T00:00:00Z")
        self.assertEqual(n.raw["metadata"]["labels"], {"example.com/a": "b"})
        self.assertEqual(n.raw["status"]["conditions"][0]["status"], "True")


class PartTest(unittest.TestCase):
    """What a 0.2 setter returns (sdk/conformance/part.json has the shared
    cases)."""

    def test_a_keyed_section_changed_in_place_is_claimed_whole(self):
        n = Node.parse(json.dumps({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4", "x": "1"}}}))
        cap = n.status_mut("capacity")
        del cap["x"]
        cap["example.com/y"] = "2"
        self.assertEqual(n.capacity("example.com/y"), Quantity.units(2))  # reads see the writes
        self.assertEqual(
            n.part(), {"status": {"capacity": {"cpu": "4", "x": None, "example.com/y": "2"}}}
        )

    def test_conditions_changed_in_place_are_claimed_whole(self):
        n = sample()
        n.status_mut("conditions").append({"type": "Mine", "status": "True"})
        n.remove_condition("Ready")
        part = n.part()["status"]["conditions"]
        self.assertEqual(part, [{"type": "Ready", "$patch": "delete"}, {"type": "Mine", "status": "True"}])

    def test_other_status_fields_are_one_field(self):
        n = sample()
        n.set_status("images", [])
        n.remove_status("config")
        n.status_mut("daemonEndpoints")["kubeletEndpoint"] = {"Port": 10250}
        self.assertEqual(
            n.part(),
            {"status": {"images": [], "config": None, "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}},
        )
        # A keyed section removed whole: each key it held is removed.
        n = Node.parse(json.dumps({"status": {"allocatable": {"cpu": "1"}}}))
        n.remove_status("allocatable")
        self.assertEqual(n.part(), {"status": {"allocatable": {"cpu": None}}})

    def test_reading_raw_is_free_but_changing_it_fails_the_call(self):
        def reader(node):
            node.set_label("k", node.raw["metadata"]["labels"]["a"])
            node.set_label("after", "raw")  # a helper after raw access is tracked

        self.assertEqual(
            json.loads(nodestatus.run(reader, json.dumps(SAMPLE))),
            {"metadata": {"labels": {"k": "1", "after": "raw"}}},
        )
        for change, where in [
            (lambda r: r["metadata"]["labels"].__setitem__("x", "y"), "metadata.labels[x]"),
            (lambda r: r["spec"].__setitem__("unschedulable", True), "spec"),
            (lambda r: r["status"]["conditions"][0].__setitem__("status", "False"), "status.conditions[Ready]"),
            (lambda r: r["status"].__setitem__("phase", "Running"), "status.phase"),
        ]:
            with self.assertRaises(Error) as e:
                nodestatus.run(lambda node: change(node.raw), json.dumps(SAMPLE))
            self.assertIn(f"changed {where} in node.raw", str(e.exception))

    def test_merge_part_is_what_the_host_does(self):
        part = {
            "metadata": {"name": "ignored", "labels": {"a": None, "b": "2"}},
            "status": {
                "conditions": [
                    {"type": "Ready", "$patch": "delete"},
                    {"type": "X", "status": "True", "reason": "R"},
                ],
                "capacity": {"example.com/z": "1"},
                "images": None,
            },
        }
        out = nodestatus.merge_part(sample(), json.dumps(part), now="2030-01-01T00:00:00Z")
        self.assertEqual(out.name, "n1")
        self.assertEqual(out.labels(), {"b": "2"})
        self.assertEqual(
            out.raw["status"]["conditions"],
            [{"type": "X", "status": "True", "reason": "R",
              "lastHeartbeatTime": "2030-01-01T00:00:00Z", "lastTransitionTime": "2030-01-01T00:00:00Z"}],
        )
        self.assertEqual(out.raw["status"]["capacity"], {"example.com/z": "1"})
        self.assertNotIn("images", out.raw["status"])
        self.assertEqual(json.loads(sample().to_json()), SAMPLE)  # the input is unchanged
        # A condition whose status holds keeps its transition time.
        kept = nodestatus.merge_part(
            sample(), {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, now="2030-01-01T00:00:00Z"
        )
        self.assertEqual(kept.condition("Ready").last_transition_time, "2020-01-01T00:00:00Z")
        self.assertEqual(kept.condition("Ready").last_heartbeat_time, "2030-01-01T00:00:00Z")

    def test_the_fake_host_keeps_the_parts(self):
        rec = nodestatus.fake_host()
        try:
            Labeler().set(json.dumps(SAMPLE))
        finally:
            nodestatus.clear_fake_host()
        self.assertEqual(rec.parts, [{"metadata": {"labels": {"example.com/labeled": "yes"}}}])


class ConditionTest(unittest.TestCase):
    def test_conditions_follow_the_kubelet_rules(self):
        n = sample()
        t = n.set_condition("Ready", ConditionStatus.TRUE, "r2", "m2", now="2021-01-01T00:00:00Z")
        self.assertFalse(t.flipped)
        self.assertEqual(t.previous, ConditionStatus.TRUE)
        c = n.condition("Ready")
        self.assertEqual(c.last_heartbeat_time, "2021-01-01T00:00:00Z")
        self.assertEqual(c.last_transition_time, "2020-01-01T00:00:00Z")
        self.assertEqual(c.reason, "r2")
        self.assertEqual(c.message, "m2")

        t = n.set_condition("Ready", ConditionStatus.FALSE, "r3", "m3", now="2022-01-01T00:00:00Z")
        self.assertTrue(t.flipped)
        self.assertEqual(t.previous, ConditionStatus.TRUE)
        self.assertEqual(t.current, ConditionStatus.FALSE)
        self.assertEqual(n.condition("Ready").last_transition_time, "2022-01-01T00:00:00Z")

        t = n.set_condition("Custom", ConditionStatus.UNKNOWN, "", "", now="2022-01-01T00:00:00Z")
        self.assertTrue(t.flipped)
        self.assertIsNone(t.previous)
        self.assertEqual([c.type for c in n.conditions()], ["Ready", "Custom"])
        self.assertEqual(
            n.status("conditions")[1],
            {
                "type": "Custom",
                "status": "Unknown",
                "lastHeartbeatTime": "2022-01-01T00:00:00Z",
                "lastTransitionTime": "2022-01-01T00:00:00Z",
                "reason": "",
                "message": "",
            },
        )
        self.assertTrue(n.remove_condition("Custom"))
        self.assertIsNone(n.condition("Custom"))
        self.assertFalse(n.remove_condition("Custom"))

    def test_status_spellings(self):
        n = Node.named("n")
        n.set_condition("A", "False", now="2024-01-01T00:00:00Z")
        n.set_condition("B", False, now="2024-01-01T00:00:00Z")
        self.assertEqual(n.condition("A").status, "False")
        self.assertEqual(n.condition("B").status, "False")
        self.assertEqual(ConditionStatus.from_bool(True), "True")
        self.assertEqual(str(ConditionStatus.UNKNOWN), "Unknown")
        with self.assertRaises(Error):
            n.set_condition("C", "maybe")

    def test_default_time_is_now(self):
        n = Node.named("n")
        n.set_condition("A", True)
        c = n.condition("A")
        self.assertRegex(c.last_heartbeat_time, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(c.last_heartbeat_time, c.last_transition_time)
        self.assertTrue(re.match(r"^\d{4}-", nodestatus.now()))


class HostTest(unittest.TestCase):
    def tearDown(self):
        host.set_native_config({})

    def test_config(self):
        self.assertEqual(host.config(), {})
        host.set_native_config({"minKernel": "5.15"})
        self.assertEqual(host.config(), {"minKernel": "5.15"})
        host.set_native_config('{"a": 1}')
        self.assertEqual(host.config(), {"a": 1})
        host.set_native_config("null")
        self.assertEqual(host.config(), {})
        for bad in ("[1]", "{nope"):
            host.set_native_config(bad)
            with self.assertRaises(Error):
                host.config()

    def test_log_and_events(self):
        nodestatus._Native.echo = False
        try:
            host.info("hello")
            host.log("warning", "careful")
            self.assertEqual(nodestatus._Native.logs[-2:], [("info", "hello"), ("warn", "careful")])
            with self.assertRaises(ValueError):
                host.log("loud", "x")
            host.record_event("Normal", "Rebooted", "node rebooted")
            self.assertEqual(nodestatus._Native.events[-1], ("Normal", "Rebooted", "node rebooted"))
            with self.assertRaises(ValueError):
                host.record_event("Bad", "R", "m")
        finally:
            nodestatus._Native.echo = True

    def test_machine_facts(self):
        info = host.system_info()
        self.assertTrue(info.kernel_release)
        self.assertGreaterEqual(info.cpus, 1)
        self.assertEqual(host.network_interfaces(), [])
        self.assertEqual(host.node_problems(), [])
        st = host.statvfs("/")
        self.assertGreater(st.total_bytes, 0)
        with self.assertRaises(Error):
            host.statvfs("/does/not/exist")


class Labeler(Plugin):
    def metadata(self):
        return Metadata("labeler", "1.0.0", description="labels", paths=["/proc"])

    def set(self, node):
        cfg = host.config()
        if cfg.get("fail"):
            raise Error("asked to fail")
        if cfg.get("crash"):
            open("/does/not/exist")
        if cfg.get("bug"):
            {}["missing"]
        if cfg.get("lazy"):
            import does_not_exist_anywhere  # noqa: F401
        node.set_label("example.com/labeled", "yes")


class PluginTest(unittest.TestCase):
    def tearDown(self):
        host.set_native_config({})

    def test_metadata(self):
        m = Labeler().metadata()
        self.assertEqual(m, Metadata("labeler", "1.0.0", "labels", ["/proc"], [], False))

    def test_set_returns_the_part(self):
        out = json.loads(Labeler().set(json.dumps(SAMPLE)))
        self.assertEqual(out, {"metadata": {"labels": {"example.com/labeled": "yes"}}})
        # The node as the host has it after merging the part.
        merged = nodestatus.apply(Labeler, SAMPLE)
        self.assertEqual(merged.label("example.com/labeled"), "yes")
        self.assertEqual(merged.raw["status"], SAMPLE["status"])

    def test_errors_become_messages(self):
        nodestatus._Native.echo = False
        try:
            for cfg, message in [
                ({"fail": True}, "asked to fail"),
                ({"crash": True}, "No such file or directory: /does/not/exist"),
                ({"bug": True}, "KeyError: 'missing'"),
                (
                    {"lazy": True},
                    "ModuleNotFoundError: No module named 'does_not_exist_anywhere' (import every "
                    "module at the top of the plugin's module, not inside set())",
                ),
            ]:
                host.set_native_config(cfg)
                with self.assertRaises(Error) as e:
                    Labeler().set(json.dumps(SAMPLE))
                self.assertEqual(str(e.exception), message)
            with self.assertRaises(Error) as e:
                Labeler().set("[]")
            self.assertIn("the host sent a node that does not parse", str(e.exception))
        finally:
            nodestatus._Native.echo = True

    def test_subclass_of_a_plugin_keeps_working(self):
        class Child(Labeler):
            def metadata(self):
                return Metadata("child", "2.0.0")

        self.assertEqual(Child().metadata().name, "child")
        out = json.loads(Child().set(json.dumps(SAMPLE)))
        self.assertEqual(out["metadata"]["labels"]["example.com/labeled"], "yes")

    def test_run(self):
        out = nodestatus.run(lambda n: n.set_label("example.com/r", "1"), '{"metadata":{}}')
        self.assertEqual(json.loads(out), {"metadata": {"labels": {"example.com/r": "1"}}})


class FakeHostTest(unittest.TestCase):
    """The fake host and the file helpers, as the JavaScript SDK's."""

    def tearDown(self):
        nodestatus.clear_fake_host()

    def test_files_grants_and_the_not_granted_error(self):
        from nodestatus import FileError, fake_host

        fake_host(files={"/proc/loadavg": "0.5 0.5 0.5 1/100 42\n", "/proc/sys/x": "1"})
        self.assertEqual(host.read_file("/proc/loadavg").split()[0], "0.5")
        self.assertEqual(host.read_dir("/proc"), ["loadavg", "sys"])
        self.assertTrue(host.exists("/proc/sys/x"))
        self.assertFalse(host.exists("/proc/nope"))
        self.assertIsNone(host.try_read_file("/proc/nope"))
        with self.assertRaises(FileError) as e:
            host.read_file("/proc/nope")
        self.assertEqual(e.exception.code, "no-entry")
        # Outside every grant: not-granted, never "missing".
        for call in (host.read_file, host.try_read_file, host.exists, host.read_dir):
            with self.assertRaises(FileError) as e:
                call("/etc/hostname")
            self.assertEqual(e.exception.code, "not-granted")
            self.assertIn("plugins.<name>.paths", str(e.exception))
        fake_host(files={"/proc/loadavg": "x"}, paths=[])
        with self.assertRaises(FileError) as e:
            host.read_file("/proc/loadavg")
        self.assertEqual(e.exception.code, "not-granted")

    def test_records_logs_events_and_answers_facts(self):
        from nodestatus import EventType, fake_host

        rec = fake_host(config={"k": 1}, system={"cpus": 16}, node_problems=["p"])
        self.assertEqual(host.config(), {"k": 1})
        self.assertEqual(host.system_info().cpus, 16)
        self.assertEqual(host.system_info().hostname, "test-node")
        self.assertEqual(host.node_problems(), ["p"])
        host.warn("careful")
        host.record_event(EventType.Warning, "Hot", "too hot")
        host.record_event("normal", "Cool", "cool again")
        self.assertEqual([(l.level, l.message) for l in rec.logs], [("warn", "careful")])
        self.assertEqual(
            [(e.type, e.reason) for e in rec.events],
            [(EventType.Warning, "Hot"), (EventType.Normal, "Cool")],
        )
        with self.assertRaises(ValueError):
            host.record_event("Urgent", "X", "y")

    def test_open_outside_every_grant_says_that_grants_exist(self):
        # Plain open() of a path the plugin was not granted: in a component
        # it does not exist, and the message says that a grant may be missing.
        nodestatus._Native.echo = False
        try:
            fake_host = nodestatus.fake_host
            fake_host(config={"crash": True}, paths=["/proc"])
            with self.assertRaises(Error) as e:
                Labeler().set(json.dumps(SAMPLE))
            self.assertEqual(
                str(e.exception),
                "No such file or directory: /does/not/exist (not inside a directory granted to "
                "this plugin: ask for it in Metadata.paths, and the operator grants it in "
                "plugins.<name>.paths)",
            )
            # Inside a grant, a missing file is only missing.
            fake_host(config={"crash": True}, paths=["/does"])
            with self.assertRaises(Error) as e:
                Labeler().set(json.dumps(SAMPLE))
            self.assertEqual(str(e.exception), "No such file or directory: /does/not/exist")
        finally:
            nodestatus._Native.echo = True

    def test_reads_a_proc_sys_file(self):
        # One read of the whole limit fails there (ENOMEM above 4 MiB).
        self.assertRegex(host.read_file("/proc/sys/kernel/osrelease"), r"^\d+\.\d+")

    def test_the_real_machine_has_no_not_granted_paths(self):
        # Natively every path is visible: a missing file is missing.
        from nodestatus import FileError

        with self.assertRaises(FileError) as e:
            host.read_file("/nonexistent-dir-xyz/file")
        self.assertEqual(e.exception.code, "no-entry")
        self.assertTrue(host.exists("/"))


if __name__ == "__main__":
    unittest.main()

"""nodestatus: write node-status setters in Python.

A setter is a WebAssembly component that the nodestatus host calls once per
status pass with the Node as JSON; it returns its part of the node (WIT
``nodestatus:plugin@0.2.1``): the fields it sets. This package is the Python
counterpart of the Rust SDK (``sdk/src``):

- :class:`Plugin`: subclass it as ``Setter`` and write ``metadata()`` and
  ``set(node)``, which changes the node; the JSON, the part (every field
  ``set`` wrote), the ``result<option<string>, string>`` and the exceptions
  are handled for you;
- :class:`Node`: the node, with helpers for labels, annotations, conditions
  (with the kubelet's heartbeat and transition rules), capacity and
  allocatable :class:`Quantity`, addresses and ``nodeInfo``;
- :class:`host`: the host's log, your plugin's config, events, and machine
  facts.

    import os

    import nodestatus
    from nodestatus import ConditionStatus, Metadata, Node

    class Setter(nodestatus.Plugin):
        def metadata(self) -> Metadata:
            return Metadata("maintenance", "0.1.0",
                            description="marks the node when /run/maintenance exists",
                            paths=["/run"])

        def set(self, node: Node) -> None:
            on = os.path.exists("/run/maintenance")
            node.set_label("example.com/maintenance", "true" if on else "false")
            node.set_condition("Maintenance", ConditionStatus.from_bool(on),
                               "MaintenanceScheduled" if on else "NoMaintenance")

Build it with componentize-py against the ``wit/`` directory (``-d wit``,
with its ``deps/``), world ``plugin``. A setter that also reacts to the
kernel log, a log file or the journal adds ``subscribe`` and ``on_lines``
(:mod:`nodestatus.reactor`), binds ``Reactor = Setter``, and builds with the
world ``reactor-plugin``.
The package is pure Python with no dependencies, one module per concern
(``quantity``, ``timestamps``, ``condition``, ``node``, ``host``,
``testing``, ``plugin``). It imports the generated bindings (``wit_world``) only when it runs inside a component, so the same
source runs natively under ``python3 -m unittest``.
"""

from __future__ import annotations

from .condition import Condition, ConditionStatus, Transition
from .errors import Error
from .host import MAX_FILE_BYTES, EventType, FileError, _Native, host
from .node import Node
from .plugin import Metadata, Plugin, run, run_lines
from .reactor import Lines, Match, Stream, Subscriptions
from .quantity import Quantity
from .testing import FakeHost, apply, clear_fake_host, fake_host, merge_part
from .timestamps import now, rfc3339

__all__ = [
    "Condition",
    "ConditionStatus",
    "Error",
    "EventType",
    "FileError",
    "FakeHost",
    "Lines",
    "Match",
    "Metadata",
    "Node",
    "Plugin",
    "Quantity",
    "Stream",
    "Subscriptions",
    "Transition",
    "apply",
    "clear_fake_host",
    "fake_host",
    "host",
    "merge_part",
    "now",
    "rfc3339",
    "run",
    "run_lines",
]

__version__ = "0.2.0"

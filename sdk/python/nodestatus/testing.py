"""A fake host for native unit tests: :func:`fake_host` serves the host
functions of :mod:`nodestatus.host` from a config, files and machine facts
that the test gives, and records what the setter logged and recorded and the
parts it returned, as the JavaScript SDK's ``testing.js`` does.
:func:`merge_part` and :func:`apply` show the node as the host would have it
after merging a setter's part."""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, List, Optional, Sequence, Union

from . import timestamps
from .host import _Native, _normalize
from .node import Node
from .plugin import run


_DEFAULT_SYSTEM = dict(
    hostname="test-node",
    kernel_release="6.1.0-test-amd64",
    kernel_version="#1 SMP PREEMPT_DYNAMIC Debian 6.1.0",
    machine="x86_64",
    os_release='PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n',
    machine_id="0123456789abcdef0123456789abcdef",
    system_uuid="00000000-0000-0000-0000-000000000000",
    boot_id="11111111-2222-3333-4444-555555555555",
    cpus=4,
)


class FakeHost:
    """The fake host of :func:`fake_host`: what the setter logged
    (``logs``: ``level``, ``message``) and recorded (``events``: ``type``,
    ``reason``, ``message``), as the JavaScript SDK's ``fakeHost`` records
    them, and the parts its calls returned (``parts``, parsed)."""

    def __init__(
        self,
        config: Any,
        system: Dict[str, Any],
        files: Dict[str, Union[str, bytes]],
        paths: Optional[Sequence[str]],
        network_interfaces: Sequence[Any],
        node_problems: Sequence[str],
        statvfs: Dict[str, Dict[str, Any]],
    ) -> None:
        self.config = config
        self.system = {**_DEFAULT_SYSTEM, **system}
        self.files = {
            _normalize(p): (v.encode("utf-8") if isinstance(v, str) else bytes(v)) for p, v in files.items()
        }
        if paths is None:
            paths = sorted({"/" + f.split("/")[1] for f in self.files})
        self.paths = [_normalize(p) for p in paths]
        self.network_interfaces = list(network_interfaces)
        self.node_problems = list(node_problems)
        self.statvfs = dict(statvfs)
        self.logs: List[Any] = []
        self.events: List[Any] = []
        self.parts: List[Dict[str, Any]] = []

    def is_dir(self, path: str) -> bool:
        prefix = "/" if path == "/" else path + "/"
        return any(f.startswith(prefix) for f in self.files)


def fake_host(
    config: Any = None,
    system: Optional[Dict[str, Any]] = None,
    files: Optional[Dict[str, Union[str, bytes]]] = None,
    paths: Optional[Sequence[str]] = None,
    network_interfaces: Sequence[Any] = (),
    node_problems: Sequence[str] = (),
    statvfs: Optional[Dict[str, Dict[str, Any]]] = None,
) -> FakeHost:
    """Installs (or replaces) a fake host for unit tests, natively, as the
    JavaScript SDK's ``fakeHost`` does. Every argument is optional:

    - ``config``: the plugin's config (what ``plugins.<name>.config`` holds);
    - ``system``: fields of :meth:`host.system_info` over a default (cpus 4, ...);
    - ``files``: ``{"/abs/path": "text" or b"bytes"}``, the host's files, read
      through :meth:`host.read_file` and friends;
    - ``paths``: the granted directories (default: the first component of
      every file, e.g. ``/proc``); ``[]`` grants nothing, so every read is
      ``not-granted``;
    - ``network_interfaces``, ``node_problems``: what those return;
    - ``statvfs``: ``{"/path": {total_bytes: ..., ...}}``.

    Returns the :class:`FakeHost`, whose ``logs`` and ``events`` fill as the
    setter runs. Call :func:`fake_host` again to change it, and
    :func:`clear_fake_host` to go back to the machine's answers."""
    fake = FakeHost(
        config if config is not None else {},
        system or {},
        files or {},
        paths,
        network_interfaces,
        node_problems,
        statvfs or {},
    )
    _Native.fake = fake
    _Native.config = fake.config
    return fake


def clear_fake_host() -> None:
    """Removes the fake host: the functions answer from this machine again."""
    _Native.fake = None
    _Native.config = {}


#: The string maps of a Node, merged key by key.
_MAPS = {("metadata", "labels"), ("metadata", "annotations"), ("status", "capacity"),
         ("status", "allocatable"), ("status", "nodeInfo")}


def merge_part(node: Union[Node, Dict[str, Any], str], part: Union[str, Dict[str, Any], None],
               now: Optional[str] = None) -> Node:
    """The node as the host has it after merging a setter's ``part`` into
    ``node`` (neither is changed): a label, annotation, capacity, allocatable
    or ``nodeInfo`` key is set, or removed when ``None``; a condition
    replaces the one of its type (or is appended), and
    ``{"type": T, "$patch": "delete"}`` removes it; the host stamps the
    conditions' times (heartbeat ``now``; transition ``now`` only when the
    status changed); any other field is replaced whole, or removed when
    ``None``. ``kind``, ``apiVersion`` and ``metadata.name`` are not merged.
    A part of ``None`` (the WIT's ``none``) changes nothing. What the host
    does beyond one call (removing a field the setter set before and leaves
    out now) is not done here."""
    if isinstance(node, Node):
        raw = json.loads(node.to_json())
    elif isinstance(node, str):
        raw = Node.parse(node)._raw
    else:
        raw = copy.deepcopy(node)
    if isinstance(part, str):
        part = json.loads(part)
    if part is None:
        return Node(raw)
    if not isinstance(part, dict):
        raise TypeError(f"a part is a JSON object, not {type(part).__name__}")
    ts = now if now is not None else timestamps.now()
    for section, fields in part.items():
        if section in ("kind", "apiVersion") or not isinstance(fields, dict):
            continue
        target = raw.get(section)
        if not isinstance(target, dict):
            target = raw[section] = {}
        for key, value in fields.items():
            if section == "metadata" and key == "name":
                continue
            if (section, key) in _MAPS and isinstance(value, dict):
                if key not in target and all(v is None for v in value.values()):
                    continue  # no map made to remove from
                m = target.get(key)
                if not isinstance(m, dict):
                    m = target[key] = {}
                for k, v in value.items():
                    if v is None:
                        m.pop(k, None)
                    else:
                        m[k] = v
            elif section == "status" and key == "conditions" and isinstance(value, list):
                lst = target.get("conditions")
                if not isinstance(lst, list):
                    lst = target["conditions"] = []
                for c in value:
                    at = next((i for i, o in enumerate(lst) if isinstance(o, dict) and o.get("type") == c.get("type")), None)
                    if c.get("$patch") == "delete":
                        if at is not None:
                            del lst[at]
                        continue
                    old = lst[at] if at is not None else None
                    new = copy.deepcopy(c)
                    new["lastHeartbeatTime"] = ts
                    kept = old.get("lastTransitionTime") if old is not None and old.get("status") == c.get("status") else None
                    new["lastTransitionTime"] = kept if isinstance(kept, str) else ts
                    if at is None:
                        lst.append(new)
                    else:
                        lst[at] = new
            elif value is None:
                target.pop(key, None)
            else:
                target[key] = copy.deepcopy(value)
    return Node(raw)


def apply(setter: Any, node: Union[Node, Dict[str, Any], str], now: Optional[str] = None) -> Node:
    """Runs a setter over ``node`` and returns the node as the host has it
    after merging the part (:func:`merge_part`). ``setter`` is a
    :class:`~nodestatus.Plugin` (its class or an instance) or a function
    ``set(node)``. Raises :class:`~nodestatus.Error` as the call does."""
    if isinstance(node, Node):
        text = node.to_json()
    elif isinstance(node, str):
        text = node
    else:
        text = json.dumps(node)
    if isinstance(setter, type):
        setter = setter()
    part = setter.set(text) if hasattr(setter, "metadata") else run(setter, text)
    return merge_part(text, part, now=now)

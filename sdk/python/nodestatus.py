"""nodestatus: write node-status setters in Python.

A setter is a WebAssembly component that the nodestatus host calls once per
status pass with the Node as JSON; it changes its part of the node and returns
it. This module is the Python counterpart of the Rust SDK (``sdk/src``):

- :class:`Plugin`: subclass it as ``Setter`` and write ``metadata()`` and
  ``set(node)``; the JSON, the ``result<string, string>`` and the
  exceptions are handled for you;
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

Build it with componentize-py against ``wit/setter.wit``, world ``plugin``.
The module is pure Python with no dependencies. It imports the generated
bindings (``wit_world``) only when it runs inside a component, so the same
source runs natively under ``python3 -m unittest``.
"""

from __future__ import annotations

import enum
import json
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__all__ = [
    "Condition",
    "ConditionStatus",
    "Error",
    "EventType",
    "FileError",
    "FakeHost",
    "Metadata",
    "Node",
    "Plugin",
    "Quantity",
    "Transition",
    "clear_fake_host",
    "fake_host",
    "host",
    "now",
    "run",
]

__version__ = "0.1.0"


class Error(Exception):
    """An error a setter raises; the host reports its message."""


# --------------------------------------------------------------------------
# The generated bindings, imported lazily.

_BINDINGS: Any = None


def _bindings() -> Any:
    """The componentize-py bindings as a namespace, or ``None`` natively."""
    global _BINDINGS
    if _BINDINGS is None:
        try:
            from componentize_py_types import Err  # type: ignore
            from wit_world.exports import setter as exports  # type: ignore
            from wit_world.imports import host as imports  # type: ignore
        except ImportError:
            _BINDINGS = False
        else:

            class _B:
                pass

            _BINDINGS = _B()
            _BINDINGS.Err = Err
            _BINDINGS.setter = exports
            _BINDINGS.host = imports
    return _BINDINGS or None


# Imported now, so that componentize-py's build-time snapshot holds them.
_bindings()


# --------------------------------------------------------------------------
# Time.


def now() -> str:
    """The current time as a condition's times are written:
    ``2026-01-02T03:04:05Z`` (RFC 3339, UTC, seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


_now = now


# --------------------------------------------------------------------------
# Quantities.

_BINARY = (("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60))
_DECIMAL = (
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
)
_EXP = re.compile(r"[+-]?[0-9]+\Z")
_I128_MAX = (1 << 127) - 1


class Quantity:
    """A Kubernetes resource quantity (``2``, ``1500m``, ``16Gi``, ``100M``),
    held exactly in thousandths of a unit, written the way the API server
    writes it.

    ``format`` is ``"BinarySI"`` (powers of 1024: ``Ki``, ``Mi``, ...) or
    ``"DecimalSI"`` (powers of 1000: ``m``, ``k``, ``M``, ...).
    """

    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"

    __slots__ = ("_millis", "_format")

    def __init__(self, millis: int, format: str = DECIMAL_SI) -> None:
        if format not in (self.BINARY_SI, self.DECIMAL_SI):
            raise ValueError(f"format must be BinarySI or DecimalSI, not {format!r}")
        self._millis = int(millis)
        self._format = format

    @classmethod
    def units(cls, n: int) -> "Quantity":
        """Whole units, written in decimal (``cpu``, ``pods``)."""
        return cls(int(n) * 1000, cls.DECIMAL_SI)

    @classmethod
    def millis(cls, m: int) -> "Quantity":
        """Thousandths of a unit (``1500m`` CPU)."""
        return cls(int(m), cls.DECIMAL_SI)

    @classmethod
    def bytes(cls, b: int) -> "Quantity":
        """A byte count, written in binary units (``memory``,
        ``ephemeral-storage``)."""
        return cls(int(b) * 1000, cls.BINARY_SI)

    @classmethod
    def parse(cls, s: str) -> "Quantity":
        """Parses the API server's quantity syntax. Sub-milli fractions round
        up, as the API server does. Raises :class:`Error` on bad input."""

        def err() -> Error:
            return Error(f"{s!r} is not a quantity (for example 2, 500m, 16Gi, 1.5G)")

        if not isinstance(s, str):
            raise err()
        t = s.strip()
        if not t or len(t) > 64:
            raise err()
        end = 0
        while end < len(t) and (t[end].isascii() and (t[end].isdigit() or t[end] in ".+-")):
            end += 1
        num, suffix = t[:end], t[end:]
        neg = num.startswith("-")
        digits = num[1:] if num[:1] in ("-", "+") else num
        whole, _, frac = digits.partition(".")
        if (not whole and not frac) or not _ascii_digits(whole) or not _ascii_digits(frac):
            raise err()
        binary = dict(_BINARY)
        decimal = dict(_DECIMAL)
        if not suffix:
            dec_exp, bin_exp, fmt = 0, 0, cls.DECIMAL_SI
        elif suffix in binary:
            dec_exp, bin_exp, fmt = 0, binary[suffix], cls.BINARY_SI
        elif suffix in decimal:
            dec_exp, bin_exp, fmt = decimal[suffix], 0, cls.DECIMAL_SI
        elif suffix[0] in "eE" and _EXP.match(suffix[1:]):
            dec_exp, bin_exp, fmt = int(suffix[1:]), 0, cls.DECIMAL_SI
        else:
            raise err()
        mantissa = int((whole + frac).lstrip("0") or "0")
        exp10 = dec_exp + 3 - len(frac)
        if exp10 >= 0:
            if exp10 > 38:
                raise err()
            scaled = mantissa * 10**exp10
        else:
            if -exp10 > 38:
                raise err()
            p = 10 ** (-exp10)
            scaled = (mantissa + p - 1) // p  # round up, as resource.Quantity does
        scaled <<= bin_exp
        if scaled > _I128_MAX:
            raise err()
        return cls(-scaled if neg else scaled, fmt)

    @property
    def format(self) -> str:
        """``"BinarySI"`` or ``"DecimalSI"``."""
        return self._format

    def as_millis(self) -> int:
        """The value in thousandths of a unit."""
        return self._millis

    def as_units_ceil(self) -> int:
        """The value in whole units, rounded up."""
        return -((-self._millis) // 1000)

    def add(self, other: "Quantity") -> "Quantity":
        """``self + other``, in this quantity's format."""
        return Quantity(self._millis + other._millis, self._format)

    def saturating_sub(self, other: "Quantity") -> "Quantity":
        """``self - other``, never below zero (the kubelet's allocatable
        rule)."""
        return Quantity(max(self._millis - other._millis, 0), self._format)

    def __str__(self) -> str:
        """The canonical form: the largest suffix that writes the value as a
        whole number."""
        m = self._millis
        if m % 1000 != 0:
            return f"{m}m"
        units = _trunc_div(m, 1000)
        if units == 0:
            return "0"
        if self._format == self.BINARY_SI:
            for name, exp in reversed(_BINARY):
                d = 1 << exp
                if _trunc_rem(units, d) == 0:
                    return f"{_trunc_div(units, d)}{name}"
            return str(units)
        for name, exp in reversed(_DECIMAL):
            if exp <= 0:
                continue
            d = 10**exp
            if _trunc_rem(units, d) == 0:
                return f"{_trunc_div(units, d)}{name}"
        return str(units)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def _key(self) -> Tuple[int, str]:
        return (self._millis, self._format)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: "Quantity") -> bool:
        return self._key() < other._key()

    def __le__(self, other: "Quantity") -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: "Quantity") -> bool:
        return self._key() > other._key()

    def __ge__(self, other: "Quantity") -> bool:
        return self._key() >= other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _ascii_digits(s: str) -> bool:
    return all("0" <= c <= "9" for c in s)


def _trunc_div(a: int, b: int) -> int:
    """Integer division rounding toward zero, like Rust's ``/``."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _trunc_rem(a: int, b: int) -> int:
    return a - b * _trunc_div(a, b)


# --------------------------------------------------------------------------
# Conditions.


class ConditionStatus(str, enum.Enum):
    """``True``, ``False`` or ``Unknown``, as the API spells them."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"

    @classmethod
    def from_bool(cls, b: bool) -> "ConditionStatus":
        """``TRUE`` when ``b``, else ``FALSE``."""
        return cls.TRUE if b else cls.FALSE

    @classmethod
    def parse(cls, s: Any) -> Optional["ConditionStatus"]:
        """The status named by ``s``, or ``None`` when it is not one."""
        try:
            return cls(s)
        except (ValueError, TypeError):
            return None

    def __str__(self) -> str:
        return self.value


@dataclass
class Condition:
    """A node condition as the API has it."""

    type: str
    status: str
    last_heartbeat_time: Optional[str] = None
    last_transition_time: Optional[str] = None
    reason: Optional[str] = None
    message: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Condition":
        return cls(
            type=d.get("type", ""),
            status=d.get("status", ""),
            last_heartbeat_time=d.get("lastHeartbeatTime"),
            last_transition_time=d.get("lastTransitionTime"),
            reason=d.get("reason"),
            message=d.get("message"),
        )


@dataclass(frozen=True)
class Transition:
    """What :meth:`Node.set_condition` did."""

    previous: Optional[ConditionStatus]
    """The status before, ``None`` for a new condition."""
    current: ConditionStatus
    """The status now."""
    flipped: bool
    """Whether the status changed (a new condition counts as a change); the
    kubelet records an event when it does."""


# --------------------------------------------------------------------------
# The Node.


class Node:
    """A ``v1.Node`` as a dict, with the helpers a setter needs.

    ``node.raw`` is the parsed JSON itself; anything the helpers do not cover
    can be changed there directly. Setters on maps are no-ops when the value
    is already there, so an unchanged node serializes to the same JSON.
    """

    __slots__ = ("raw",)

    def __init__(self, raw: Dict[str, Any]) -> None:
        if not isinstance(raw, dict):
            raise Error("a Node must be a JSON object")
        for section in ("metadata", "status"):
            if section in raw and raw[section] is not None and not isinstance(raw[section], dict):
                raise Error(f"the Node's {section} must be a JSON object")
        self.raw = raw

    @classmethod
    def parse(cls, text: str) -> "Node":
        """Parses a Node's JSON. Raises :class:`Error` on text that is not a
        JSON object, or whose ``metadata`` or ``status`` is not an object."""
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise Error(f"not JSON: {e}") from None
        return cls(raw)

    @classmethod
    def named(cls, name: str) -> "Node":
        """A Node with only a name, for tests and examples."""
        return cls({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {}})

    def to_json(self) -> str:
        """The Node as compact JSON, keys in their original order."""
        return json.dumps(self.raw, separators=(",", ":"), ensure_ascii=False)

    def __repr__(self) -> str:
        return f"Node({self.to_json()})"

    # -- sections ---------------------------------------------------------

    def _section(self, name: str) -> Dict[str, Any]:
        s = self.raw.get(name)
        if not isinstance(s, dict):
            s = self.raw[name] = {}
        return s

    def _map(self, section: str, key: str) -> Optional[Dict[str, Any]]:
        s = self.raw.get(section)
        if not isinstance(s, dict):
            return None
        m = s.get(key)
        return m if isinstance(m, dict) else None

    def _map_mut(self, section: str, key: str) -> Dict[str, Any]:
        s = self._section(section)
        m = s.get(key)
        if not isinstance(m, dict):
            m = s[key] = {}
        return m

    def _set_in(self, section: str, map_: str, key: str, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"{section}.{map_}[{key}] must be a string, not {type(value).__name__}")
        m = self._map(section, map_)
        if m is None or m.get(key) != value:
            self._map_mut(section, map_)[key] = value

    def _remove_in(self, section: str, map_: str, key: str) -> bool:
        m = self._map(section, map_)
        if m is not None and key in m:
            del m[key]
            return True
        return False

    @property
    def name(self) -> str:
        """``metadata.name``."""
        v = self.metadata("name")
        return v if isinstance(v, str) else ""

    def metadata(self, key: str) -> Any:
        """A field of ``metadata``, or ``None``."""
        s = self.raw.get("metadata")
        return s.get(key) if isinstance(s, dict) else None

    def status(self, key: str) -> Any:
        """A field of ``status``, or ``None``."""
        s = self.raw.get("status")
        return s.get(key) if isinstance(s, dict) else None

    def set_status(self, key: str, value: Any) -> None:
        """Replaces a field of ``status`` (a no-op when it already holds
        ``value``)."""
        s = self._section("status")
        if s.get(key) != value or key not in s:
            s[key] = value

    def remove_status(self, key: str) -> bool:
        """Removes a field of ``status``; returns whether it was there."""
        s = self.raw.get("status")
        if isinstance(s, dict) and key in s:
            del s[key]
            return True
        return False

    # -- labels and annotations ------------------------------------------

    def labels(self) -> Dict[str, str]:
        """A copy of ``metadata.labels``."""
        return dict(self._map("metadata", "labels") or {})

    def label(self, key: str) -> Optional[str]:
        """A label's value, or ``None``."""
        v = (self._map("metadata", "labels") or {}).get(key)
        return v if isinstance(v, str) else None

    def set_label(self, key: str, value: str) -> None:
        """Sets a label (a no-op when it already has that value)."""
        self._set_in("metadata", "labels", key, value)

    def remove_label(self, key: str) -> bool:
        """Removes a label; returns whether it was there."""
        return self._remove_in("metadata", "labels", key)

    def annotations(self) -> Dict[str, str]:
        """A copy of ``metadata.annotations``."""
        return dict(self._map("metadata", "annotations") or {})

    def annotation(self, key: str) -> Optional[str]:
        """An annotation's value, or ``None``."""
        v = (self._map("metadata", "annotations") or {}).get(key)
        return v if isinstance(v, str) else None

    def set_annotation(self, key: str, value: str) -> None:
        """Sets an annotation (a no-op when it already has that value)."""
        self._set_in("metadata", "annotations", key, value)

    def remove_annotation(self, key: str) -> bool:
        """Removes an annotation; returns whether it was there."""
        return self._remove_in("metadata", "annotations", key)

    # -- capacity, allocatable, nodeInfo, addresses ----------------------

    def _quantity(self, map_: str, name: str) -> Optional[Quantity]:
        v = (self._map("status", map_) or {}).get(name)
        if not isinstance(v, str):
            return None
        try:
            return Quantity.parse(v)
        except Error:
            return None

    def capacity(self, name: str) -> Optional[Quantity]:
        """``status.capacity[name]``, parsed; ``None`` when absent or not a
        quantity."""
        return self._quantity("capacity", name)

    def allocatable(self, name: str) -> Optional[Quantity]:
        """``status.allocatable[name]``, parsed."""
        return self._quantity("allocatable", name)

    def set_capacity(self, name: str, q: Union[Quantity, str, int]) -> None:
        """Sets ``status.capacity[name]``. ``q`` is a :class:`Quantity`, a
        quantity string (validated), or whole units."""
        self._set_in("status", "capacity", name, _quantity_str(q))

    def set_allocatable(self, name: str, q: Union[Quantity, str, int]) -> None:
        """Sets ``status.allocatable[name]``."""
        self._set_in("status", "allocatable", name, _quantity_str(q))

    def remove_resource(self, name: str) -> bool:
        """Removes ``status.capacity[name]`` and ``status.allocatable[name]``;
        returns whether either was there."""
        a = self._remove_in("status", "capacity", name)
        b = self._remove_in("status", "allocatable", name)
        return a or b

    def node_info(self, field: str) -> Optional[str]:
        """``status.nodeInfo.<field>``."""
        v = (self._map("status", "nodeInfo") or {}).get(field)
        return v if isinstance(v, str) else None

    def set_node_info(self, field: str, value: str) -> None:
        """Sets ``status.nodeInfo.<field>``."""
        self._set_in("status", "nodeInfo", field, value)

    def set_addresses(self, addresses: Sequence[Tuple[str, str]]) -> None:
        """Replaces ``status.addresses`` with ``(type, address)`` pairs."""
        self.set_status("addresses", [{"type": t, "address": a} for t, a in addresses])

    # -- conditions -------------------------------------------------------

    def conditions(self) -> List[Condition]:
        """Every condition, in order."""
        lst = self.status("conditions")
        if not isinstance(lst, list):
            return []
        return [Condition.from_dict(c) for c in lst if isinstance(c, dict)]

    def condition(self, type_: str) -> Optional[Condition]:
        """The condition of this type, or ``None``."""
        for c in self.conditions():
            if c.type == type_:
                return c
        return None

    def set_condition(
        self,
        type_: str,
        status: Union[ConditionStatus, str, bool],
        reason: str = "",
        message: str = "",
        now: Optional[str] = None,
    ) -> Transition:
        """Sets a condition with the kubelet's rules:

        - ``lastHeartbeatTime`` is ``now`` on every call;
        - a new condition, or one whose status flips, gets
          ``lastTransitionTime`` = ``now``; otherwise it is kept;
        - reason and message are replaced.

        A new condition is appended. ``status`` is a
        :class:`ConditionStatus`, ``"True"``/``"False"``/``"Unknown"``, or a
        bool. ``now`` defaults to the current time. Returns a
        :class:`Transition` that says whether the status flipped (when the
        kubelet records an event).
        """
        st = ConditionStatus.from_bool(status) if isinstance(status, bool) else ConditionStatus.parse(status)
        if st is None:
            raise Error(f"{status!r} is not True, False or Unknown")
        ts = now if now is not None else _now()
        s = self._section("status")
        lst = s.get("conditions")
        if not isinstance(lst, list):
            lst = s["conditions"] = []
        index = next(
            (i for i, c in enumerate(lst) if isinstance(c, dict) and c.get("type") == type_),
            None,
        )
        existing = lst[index] if index is not None else None
        previous = ConditionStatus.parse(existing.get("status")) if existing is not None else None
        flipped = previous != st
        transition = ts
        if existing is not None and not flipped:
            kept = existing.get("lastTransitionTime")
            transition = kept if isinstance(kept, str) else ts
        new = {
            "type": type_,
            "status": st.value,
            "lastHeartbeatTime": ts,
            "lastTransitionTime": transition,
            "reason": reason,
            "message": message,
        }
        if index is None:
            lst.append(new)
        else:
            lst[index] = new
        return Transition(previous=previous, current=st, flipped=flipped)

    def remove_condition(self, type_: str) -> bool:
        """Removes a condition; returns whether it was there."""
        lst = self.status("conditions")
        if not isinstance(lst, list):
            return False
        keep = [c for c in lst if not (isinstance(c, dict) and c.get("type") == type_)]
        if len(keep) == len(lst):
            return False
        lst[:] = keep
        return True


def _quantity_str(q: Union[Quantity, str, int]) -> str:
    if isinstance(q, Quantity):
        return str(q)
    if isinstance(q, bool):
        raise TypeError("a quantity is not a bool")
    if isinstance(q, int):
        return str(Quantity.units(q))
    if isinstance(q, str):
        Quantity.parse(q)  # validate; keep the caller's spelling
        return q
    raise TypeError(f"not a quantity: {q!r}")


# --------------------------------------------------------------------------
# The host.


class _Native:
    """What the host functions answer outside a component."""

    config: Any = {}
    problems: List[str] = []
    events: List[Tuple[str, str, str]] = []
    logs: List[Tuple[str, str]] = []
    echo = True
    fake: Optional["FakeHost"] = None


_LEVELS = ("trace", "debug", "info", "warn", "error")


class EventType(str, enum.Enum):
    """Event types for :meth:`host.record_event`: ``EventType.Normal`` and
    ``EventType.Warning``, spelled as in the JavaScript SDK. The strings
    ``"Normal"`` and ``"Warning"`` (any case) are accepted too."""

    Normal = "Normal"
    Warning = "Warning"

    def __str__(self) -> str:
        return self.value


_EVENT_TYPES = tuple(t.value for t in EventType)


# Files: what the JavaScript SDK's readFile, tryReadFile, exists and readDir do.

_ERRNO = {
    "no-entry": "no such file or directory",
    "access": "permission denied",
    "is-directory": "is a directory",
    "not-directory": "not a directory",
}


class FileError(Error):
    """An error from reading a file. ``code`` is ``no-entry``, ``access``,
    ``is-directory``, ``not-directory``, ``too-large``, ``io`` or
    ``not-granted`` (the path is outside every directory granted to the
    plugin: ask for it in ``Metadata.paths``, and the operator grants it in
    ``plugins.<name>.paths``)."""

    def __init__(self, path: str, code: str, detail: Optional[str] = None) -> None:
        super().__init__(f"{path}: {detail or _ERRNO.get(code, code)}")
        self.path = path
        self.code = code


#: The default limit of :func:`host.read_file`, 16 MiB (memory is capped per call).
MAX_FILE_BYTES = 16 << 20


def _normalize(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise FileError(str(path), "invalid", "not an absolute path")
    out: List[str] = []
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if out:
                out.pop()
        else:
            out.append(seg)
    return "/" + "/".join(out)


def _granted(path: str) -> bool:
    """Whether ``path`` lies inside a directory this plugin can read. In a
    component, only the granted directories (and what is under them) exist,
    so a path none of whose ancestors can be seen is outside every grant."""
    fake = _Native.fake
    if fake is not None:
        return any(path == r or r == "/" or path.startswith(r + "/") for r in fake.paths)
    p = path
    while True:
        try:
            os.stat(p)
            return True
        except OSError:
            pass
        if p == "/":
            return False
        p = os.path.dirname(p)


def _not_granted(path: str) -> FileError:
    return FileError(
        path,
        "not-granted",
        "not inside a directory granted to this plugin; ask for it in Metadata.paths, "
        "and the operator grants it in plugins.<name>.paths",
    )


def _os_error(path: str, e: OSError) -> FileError:
    import errno as _errno

    code = {
        _errno.ENOENT: "no-entry",
        _errno.EACCES: "access",
        _errno.EPERM: "access",
        _errno.EISDIR: "is-directory",
        _errno.ENOTDIR: "not-directory",
    }.get(e.errno or 0, "io")
    return FileError(path, code, None if code != "io" else (e.strerror or str(e)))


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


class host:
    """The host's functions. Inside a component they call the host; natively
    (in unit tests) they answer from this machine and from
    :meth:`host.set_native_config`."""

    @staticmethod
    def config_json() -> str:
        """The plugin's config as raw JSON (``{}`` when none)."""
        b = _bindings()
        if b is not None:
            return b.host.config()
        c = _Native.config
        return c if isinstance(c, str) else json.dumps(c)

    @staticmethod
    def config() -> Dict[str, Any]:
        """The plugin's config, parsed (``{}`` when none). Raises
        :class:`Error` when it is not a JSON object."""
        text = host.config_json()
        try:
            value = json.loads(text) if text.strip() else {}
        except ValueError as e:
            raise Error(f"invalid plugin config: {e}") from None
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise Error(f"invalid plugin config: expected an object, got {type(value).__name__}")
        return value

    @staticmethod
    def set_native_config(config: Union[Dict[str, Any], str]) -> None:
        """Sets what :meth:`config` returns outside a component (tests)."""
        _Native.config = config

    @staticmethod
    def log(level: str, message: str) -> None:
        """Writes one line to the host's log, tagged with the plugin's name.
        ``level``: ``trace``, ``debug``, ``info``, ``warn`` or ``error``."""
        lvl = str(level).lower()
        if lvl == "warning":
            lvl = "warn"
        if lvl not in _LEVELS:
            raise ValueError(f"log level must be one of {', '.join(_LEVELS)}, not {level!r}")
        b = _bindings()
        if b is not None:
            b.host.log(b.host.Level[lvl.upper()], str(message))
            return
        if _Native.fake is not None:
            _Native.fake.logs.append(SimpleNamespace(level=lvl, message=str(message)))
            return
        _Native.logs.append((lvl, str(message)))
        if _Native.echo and lvl in ("warn", "error"):
            print(f"{lvl}: {message}", file=sys.stderr)

    @staticmethod
    def trace(message: str) -> None:
        host.log("trace", message)

    @staticmethod
    def debug(message: str) -> None:
        host.log("debug", message)

    @staticmethod
    def info(message: str) -> None:
        host.log("info", message)

    @staticmethod
    def warn(message: str) -> None:
        host.log("warn", message)

    @staticmethod
    def error(message: str) -> None:
        host.log("error", message)

    @staticmethod
    def record_event(event_type: str, reason: str, message: str) -> None:
        """Records a Kubernetes Event about this node. ``event_type`` is
        ``Normal`` or ``Warning``; ``reason`` is UpperCamelCase."""
        t = str(event_type).capitalize()
        if t not in _EVENT_TYPES:
            raise ValueError(f"event type must be EventType.Normal or EventType.Warning, not {event_type!r}")
        b = _bindings()
        if b is not None:
            b.host.record_event(b.host.EventType[t.upper()], reason, message)
            return
        if _Native.fake is not None:
            _Native.fake.events.append(SimpleNamespace(type=EventType(t), reason=reason, message=message))
            return
        _Native.events.append((t, reason, message))

    @staticmethod
    def system_info() -> Any:
        """Kernel and identity facts: ``hostname``, ``kernel_release``,
        ``kernel_version``, ``machine``, ``os_release``, ``machine_id``,
        ``system_uuid``, ``boot_id``, ``cpus``."""
        b = _bindings()
        if b is not None:
            return b.host.system()
        if _Native.fake is not None:
            return SimpleNamespace(**_Native.fake.system)
        u = os.uname()
        return SimpleNamespace(
            hostname=u.nodename,
            kernel_release=u.release,
            kernel_version=u.version,
            machine=u.machine,
            os_release=_read("/etc/os-release") or _read("/usr/lib/os-release"),
            machine_id=_read("/etc/machine-id").strip(),
            system_uuid=_read("/sys/class/dmi/id/product_uuid").strip(),
            boot_id=_read("/proc/sys/kernel/random/boot_id").strip(),
            cpus=os.cpu_count() or 1,
        )

    @staticmethod
    def network_interfaces() -> List[Any]:
        """The host's network interfaces (``name``, ``up``, ``loopback``,
        ``addresses`` of ``address``/``prefix_len``). Natively: ``[]``."""
        b = _bindings()
        if b is not None:
            return list(b.host.network_interfaces())
        return list(_Native.fake.network_interfaces) if _Native.fake is not None else []

    @staticmethod
    def statvfs(path: str) -> Any:
        """Filesystem statistics of a granted path (``total_bytes``,
        ``free_bytes``, ``available_bytes``, ``total_inodes``,
        ``free_inodes``, ``read_only``). Raises :class:`Error` when the host
        refuses."""
        b = _bindings()
        if b is not None:
            try:
                return b.host.statvfs(path)
            except b.Err as e:
                raise Error(str(e.value)) from None
        if _Native.fake is not None:
            st = _Native.fake.statvfs.get(path)
            if st is None:
                raise Error(f"statvfs: {path!r} is not inside a path granted to this plugin")
            return SimpleNamespace(**st)
        try:
            st = os.statvfs(path)
        except OSError as e:
            raise Error(f"statvfs({path!r}): {e.strerror}") from None
        return SimpleNamespace(
            total_bytes=st.f_blocks * st.f_frsize,
            free_bytes=st.f_bfree * st.f_frsize,
            available_bytes=st.f_bavail * st.f_frsize,
            total_inodes=st.f_files,
            free_inodes=st.f_ffree,
            read_only=bool(st.f_flag & os.ST_RDONLY),
        )

    @staticmethod
    def node_problems() -> List[str]:
        """Problems the host knows of that make the node not ready."""
        b = _bindings()
        if b is not None:
            return list(b.host.node_problems())
        if _Native.fake is not None:
            return list(_Native.fake.node_problems)
        return list(_Native.problems)

    @staticmethod
    def read_bytes(path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
        """A file inside a granted directory, as bytes. Raises
        :class:`FileError` whose message names the path and the reason;
        ``code == "not-granted"`` when no grant covers it."""
        abs_path = _normalize(path)
        fake = _Native.fake
        if not _granted(abs_path):
            raise _not_granted(path)
        if fake is not None:
            if abs_path in fake.files:
                data = fake.files[abs_path]
            elif fake.is_dir(abs_path):
                raise FileError(path, "is-directory")
            else:
                raise FileError(path, "no-entry")
        else:
            try:
                with open(abs_path, "rb") as f:
                    data = f.read(max_bytes + 1)
            except OSError as e:
                raise _os_error(path, e) from None
        if len(data) > max_bytes:
            raise FileError(path, "too-large", f"larger than {max_bytes} bytes")
        return data

    @staticmethod
    def read_file(path: str, max_bytes: int = MAX_FILE_BYTES) -> str:
        """A text file (UTF-8) inside a granted directory; see :meth:`read_bytes`."""
        return host.read_bytes(path, max_bytes).decode("utf-8", errors="replace")

    @staticmethod
    def try_read_file(path: str, max_bytes: int = MAX_FILE_BYTES) -> Optional[str]:
        """Like :meth:`read_file`, but ``None`` when the file does not exist
        (a directory that was not granted is still an error)."""
        try:
            return host.read_file(path, max_bytes)
        except FileError as e:
            if e.code == "no-entry":
                return None
            raise

    @staticmethod
    def exists(path: str) -> bool:
        """Whether ``path`` exists. Outside every grant it is an error, not
        ``False``: a missing grant must not read as a missing file."""
        abs_path = _normalize(path)
        if not _granted(abs_path):
            raise _not_granted(path)
        fake = _Native.fake
        if fake is not None:
            return abs_path in fake.files or fake.is_dir(abs_path)
        return os.path.exists(abs_path)

    @staticmethod
    def read_dir(path: str) -> List[str]:
        """The names in a directory inside a granted directory, sorted."""
        abs_path = _normalize(path)
        if not _granted(abs_path):
            raise _not_granted(path)
        fake = _Native.fake
        if fake is not None:
            if not fake.is_dir(abs_path):
                raise FileError(path, "no-entry")
            prefix = "/" if abs_path == "/" else abs_path + "/"
            return sorted({f[len(prefix):].split("/")[0] for f in fake.files if f.startswith(prefix)})
        try:
            return sorted(os.listdir(abs_path))
        except OSError as e:
            raise _os_error(path, e) from None


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
    them."""

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


# --------------------------------------------------------------------------
# The plugin adapter.


@dataclass
class Metadata:
    """What a plugin is and what it asks for."""

    name: str
    """Unique: lowercase letters, digits and ``-``, at most 63 bytes."""
    version: str
    """The plugin's own version, ideally SemVer."""
    description: str = ""
    """One line on what it sets."""
    paths: List[str] = field(default_factory=list)
    """Absolute directories it reads, granted read-only by the operator."""
    env: List[str] = field(default_factory=list)
    """Environment variables it reads, granted by the operator."""
    affects_readiness: bool = False
    """Whether its failure should make the node not Ready."""


def _message(e: BaseException) -> str:
    if isinstance(e, Error):
        return str(e) or "error"
    if isinstance(e, OSError) and e.strerror:
        where = f": {e.filename}" if e.filename else ""
        return f"{e.strerror}{where}"
    text = str(e)
    message = f"{type(e).__name__}: {text}" if text else type(e).__name__
    if isinstance(e, ModuleNotFoundError):
        # componentize-py keeps only the modules imported at build time.
        message += " (import every module at the top of the plugin's module, not inside set())"
    return message


def run(set_fn: Any, node_json: str) -> str:
    """Runs a setter function over a Node's JSON: parse, ``set_fn(node)``,
    serialize. Raises :class:`Error` with the message the host would get."""
    try:
        node = Node.parse(node_json)
    except Error as e:
        raise Error(f"the host sent a node that does not parse: {e}") from None
    try:
        set_fn(node)
    except Exception as e:  # every failure becomes the setter's error
        if not isinstance(e, Error):
            try:
                host.debug("".join(traceback.format_exception(type(e), e, e.__traceback__)))
            except Exception:  # logging must never hide the error itself
                pass
        raise Error(_message(e)) from e
    return node.to_json()


def _wire_metadata(self: Any) -> Any:
    m = type(self)._ns_metadata(self)
    if not isinstance(m, Metadata):
        raise TypeError(f"metadata() must return nodestatus.Metadata, not {type(m).__name__}")
    b = _bindings()
    if b is None:
        return m
    return b.setter.PluginInfo(
        name=m.name,
        version=m.version,
        description=m.description,
        paths=list(m.paths),
        env=list(m.env),
        affects_readiness=bool(m.affects_readiness),
    )


def _wire_set(self: Any, node_json: str) -> str:
    try:
        return run(lambda node: type(self)._ns_set(self, node), node_json)
    except Error as e:
        b = _bindings()
        if b is None:
            raise
        raise b.Err(str(e)) from None


class Plugin:
    """Base class of a setter. Subclass it as ``Setter`` (the name
    componentize-py looks for, after the exported interface ``setter``) and
    write two methods:

    - ``metadata(self) -> Metadata``: called once at load, with no grants; it
      must not read files or the environment;
    - ``set(self, node: Node) -> None``: change the node in place; raise
      :class:`Error` (or any exception) to fail this pass with its message.

    The class turns them into the WIT functions: ``metadata`` returns the
    bindings' ``PluginInfo``, and ``set`` takes and returns the Node's JSON and
    raises ``Err(message)`` for the ``result<string, string>``. Natively
    ``Setter().set(json)`` does the same but raises :class:`Error`, and
    ``Setter().metadata()`` returns the :class:`Metadata`.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "metadata" in own:
            cls._ns_metadata = own["metadata"]
            cls.metadata = _wire_metadata  # type: ignore[assignment]
        if "set" in own:
            cls._ns_set = own["set"]
            cls.set = _wire_set  # type: ignore[assignment]

    def metadata(self) -> Metadata:  # pragma: no cover - replaced in subclasses
        raise NotImplementedError("a nodestatus plugin must define metadata()")

    def set(self, node: Node) -> None:  # pragma: no cover - replaced in subclasses
        raise NotImplementedError("a nodestatus plugin must define set(node)")

"""The Node: labels, annotations, capacity, nodeInfo, addresses and conditions
(with the kubelet's heartbeat and transition rules), and the part of it that a
setter sets (WIT ``nodestatus:plugin@0.2.1``)."""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import timestamps
from .condition import Condition, ConditionStatus, Transition
from .errors import Error
from .quantity import Quantity


#: The keyed sections of ``status``: each key (each condition, by type) is a
#: field of its own.
KEYED_STATUS = ("capacity", "allocatable", "nodeInfo", "conditions")


class Node:
    """A ``v1.Node`` as a dict, with the helpers a setter needs.

    The node records which fields the setter writes, and :meth:`part` is what
    a 0.2 setter returns: every field written, even to the value the node
    already held (a field left out is one the setter no longer sets, and the
    host removes it). Reads after writes see the writes.

    - Labels, annotations, ``capacity``, ``allocatable`` and ``nodeInfo`` keys
      and conditions (by type) are fields one by one: the helpers write them.
    - Another key of ``status`` (``addresses``, ...) is one field:
      :meth:`set_status`, :meth:`remove_status`, :meth:`status_mut`.
    - :meth:`status_mut`, :meth:`set_status` and :meth:`remove_status` of a
      keyed section (``capacity``, ``allocatable``, ``nodeInfo``,
      ``conditions``) claim the whole section: every key in it after the call
      is in the part (and a key removed from it, as ``null``).
    - ``node.raw``, and what :meth:`status` and :meth:`metadata` return, are
      the node itself, to read. A change made there, outside the helpers, is
      one the SDK cannot attribute: the call fails with a message that names
      the field and the helper to use.
    """

    __slots__ = ("_raw", "_maps", "_conditions", "_claims", "_snapshot")

    def __init__(self, raw: Dict[str, Any]) -> None:
        if not isinstance(raw, dict):
            raise Error("a Node must be a JSON object")
        for section in ("metadata", "status"):
            if section in raw and raw[section] is not None and not isinstance(raw[section], dict):
                raise Error(f"the Node's {section} must be a JSON object")
        self._raw = raw
        # The fields written: (section, map) -> keys, in first-written order;
        # condition types; claimed status keys -> the keys (or condition
        # types) the section held when claimed, None for a whole field.
        self._maps: Dict[Tuple[str, str], Dict[str, None]] = {}
        self._conditions: Dict[str, None] = {}
        self._claims: Dict[str, Optional[List[str]]] = {}
        # The node when raw access began, to find changes made there.
        self._snapshot: Optional[Dict[str, Any]] = None

    @property
    def raw(self) -> Dict[str, Any]:
        """The parsed JSON itself, to read anything the helpers do not cover.
        Change the node through the helpers (:meth:`status_mut` for a status
        field of your own): a change made here is not in the part, and a
        setter's call that made one fails, naming it."""
        if self._snapshot is None:
            try:  # json's C encoder and decoder: several times deepcopy's speed
                self._snapshot = json.loads(json.dumps(self._raw))
            except (TypeError, ValueError):
                self._snapshot = copy.deepcopy(self._raw)
        return self._raw

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
        return json.dumps(self._raw, separators=(",", ":"), ensure_ascii=False)

    def __repr__(self) -> str:
        return f"Node({self.to_json()})"

    # -- sections ---------------------------------------------------------

    def _section(self, name: str) -> Dict[str, Any]:
        s = self._raw.get(name)
        if not isinstance(s, dict):
            s = self._raw[name] = {}
        return s

    def _map(self, section: str, key: str) -> Optional[Dict[str, Any]]:
        s = self._raw.get(section)
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

    def _wrote(self, section: str, map_: str, key: str) -> None:
        self._maps.setdefault((section, map_), {})[key] = None

    def _get_in(self, section: str, map_: str, key: str) -> Optional[str]:
        v = (self._map(section, map_) or {}).get(key)
        return v if isinstance(v, str) else None

    def _set_in(self, section: str, map_: str, key: str, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"{section}.{map_}[{key}] must be a string, not {type(value).__name__}")
        self._wrote(section, map_, key)
        m = self._map(section, map_)
        if m is None or m.get(key) != value:
            self._map_mut(section, map_)[key] = value

    def _remove_in(self, section: str, map_: str, key: str) -> bool:
        self._wrote(section, map_, key)
        m = self._map(section, map_)
        if m is not None and key in m:
            del m[key]
            return True
        return False

    @property
    def name(self) -> str:
        """``metadata.name``."""
        s = self._raw.get("metadata")
        v = s.get("name") if isinstance(s, dict) else None
        return v if isinstance(v, str) else ""

    def _get(self, section: str, key: str) -> Any:
        s = self._raw.get(section)
        return s.get(key) if isinstance(s, dict) else None

    def metadata(self, key: str) -> Any:
        """A field of ``metadata``, or ``None`` (the live value: read it, do
        not change it)."""
        self.raw  # a live value: changes made in it are found (see raw)
        return self._get("metadata", key)

    def status(self, key: str) -> Any:
        """A field of ``status``, or ``None`` (the live value: read it, do not
        change it; :meth:`status_mut` is for changing it)."""
        self.raw  # a live value: changes made in it are found (see raw)
        return self._get("status", key)

    def _claim(self, key: str) -> None:
        if key in self._claims:
            return
        held: Optional[List[str]] = None
        if key == "conditions":
            held = [c["type"] for c in _conditions_of(self._raw) if isinstance(c.get("type"), str)]
        elif key in KEYED_STATUS:
            m = self._map("status", key)
            held = list(m) if m is not None else []
        self._claims[key] = held

    def set_status(self, key: str, value: Any) -> None:
        """Replaces a field of ``status``, which the setter then sets. For a
        keyed section (``capacity``, ``allocatable``, ``nodeInfo``,
        ``conditions``), the setter sets every key in it after the call."""
        self._claim(key)
        s = self._section("status")
        if s.get(key) != value or key not in s:
            s[key] = value

    def remove_status(self, key: str) -> bool:
        """Removes a field of ``status`` (its keys, for a keyed section);
        returns whether it was there."""
        self._claim(key)
        s = self._raw.get("status")
        if isinstance(s, dict) and key in s:
            del s[key]
            return True
        return False

    def status_mut(self, key: str, default: Any = None) -> Any:
        """A field of ``status`` to change in place, set to ``default`` first
        when it is absent (``None``: an empty dict). The setter sets the whole
        field; for a keyed section (``capacity``, ``allocatable``,
        ``nodeInfo``, ``conditions``), every key in it after the call."""
        self._claim(key)
        s = self._section("status")
        if s.get(key) is None:
            s[key] = {} if default is None else default
        return s[key]

    # -- labels and annotations ------------------------------------------

    def labels(self) -> Dict[str, str]:
        """A copy of ``metadata.labels``."""
        return dict(self._map("metadata", "labels") or {})

    def label(self, key: str) -> Optional[str]:
        """A label's value, or ``None``."""
        return self._get_in("metadata", "labels", key)

    def set_label(self, key: str, value: str) -> None:
        """Sets a label (in the part even when the node already has that value)."""
        self._set_in("metadata", "labels", key, value)

    def remove_label(self, key: str) -> bool:
        """Removes a label; returns whether it was there."""
        return self._remove_in("metadata", "labels", key)

    def annotations(self) -> Dict[str, str]:
        """A copy of ``metadata.annotations``."""
        return dict(self._map("metadata", "annotations") or {})

    def annotation(self, key: str) -> Optional[str]:
        """An annotation's value, or ``None``."""
        return self._get_in("metadata", "annotations", key)

    def set_annotation(self, key: str, value: str) -> None:
        """Sets an annotation (in the part even when the node already has that value)."""
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
        quantity string (parsed, and written in canonical form as the API
        server writes it back: ``"1000m"`` becomes ``"1"``), or whole units."""
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
        return self._get_in("status", "nodeInfo", field)

    def set_node_info(self, field: str, value: str) -> None:
        """Sets ``status.nodeInfo.<field>``."""
        self._set_in("status", "nodeInfo", field, value)

    def set_addresses(self, addresses: Sequence[Tuple[str, str]]) -> None:
        """Replaces ``status.addresses`` with ``(type, address)`` pairs."""
        self.set_status("addresses", [{"type": t, "address": a} for t, a in addresses])

    # -- conditions -------------------------------------------------------

    def conditions(self) -> List[Condition]:
        """Every condition, in order."""
        lst = self._get("status", "conditions")
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
        self._conditions[type_] = None
        ts = now if now is not None else timestamps.now()
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
        """Removes a condition; returns whether it was there. The part says
        so (``{"type": T, "$patch": "delete"}``), whether or not it was."""
        self._conditions[type_] = None
        lst = self._get("status", "conditions")
        if not isinstance(lst, list):
            return False
        keep = [c for c in lst if not (isinstance(c, dict) and c.get("type") == type_)]
        if len(keep) == len(lst):
            return False
        lst[:] = keep
        return True


    # -- the part ---------------------------------------------------------

    def part(self) -> Dict[str, Any]:
        """This setter's part of the node (what a 0.2 setter returns): every
        field written so far, at its value now, ``None`` for a removed key, a
        removed condition as ``{"type": T, "$patch": "delete"}``. No kind,
        apiVersion or name, and no empty section: a setter that wrote nothing
        has the part ``{}``."""
        part: Dict[str, Any] = {}
        metadata: Dict[str, Any] = {}
        status: Dict[str, Any] = {}
        for (section, map_), keys in self._maps.items():
            if section == "metadata":
                metadata[map_] = self._map_part(section, map_, keys)
        conditions = self._conditions_part()
        if conditions:
            status["conditions"] = conditions
        for map_ in ("capacity", "allocatable", "nodeInfo"):
            keys = dict(self._maps.get(("status", map_), {}))
            if map_ in self._claims:
                for k in (self._claims[map_] or []) + list(self._map("status", map_) or {}):
                    keys[k] = None
            if keys:
                status[map_] = self._map_part("status", map_, keys)
        s = self._raw.get("status")
        s = s if isinstance(s, dict) else {}
        for key in self._claims:
            if key not in KEYED_STATUS:
                status[key] = copy.deepcopy(s[key]) if key in s else None
        if metadata:
            part["metadata"] = metadata
        if status:
            part["status"] = status
        return part

    def part_json(self) -> str:
        """:meth:`part` as compact JSON text."""
        return json.dumps(self.part(), separators=(",", ":"), ensure_ascii=False)

    def _map_part(self, section: str, map_: str, keys: Dict[str, None]) -> Dict[str, Any]:
        m = self._map(section, map_) or {}
        return {k: m.get(k) for k in keys}

    def _conditions_part(self) -> List[Dict[str, Any]]:
        types = dict(self._conditions)
        if "conditions" in self._claims:
            for t in self._claims["conditions"] or []:
                types[t] = None
            for c in _conditions_of(self._raw):
                if isinstance(c.get("type"), str):
                    types[c["type"]] = None
        live = {}
        for c in _conditions_of(self._raw):
            live.setdefault(c.get("type"), c)
        return [copy.deepcopy(live[t]) if t in live else {"type": t, "$patch": "delete"} for t in types]

    def _untracked_change(self) -> Optional[str]:
        """The first change made through ``raw`` (or a live value) that no
        helper wrote, as a path, or ``None``."""
        if self._snapshot is None:
            return None
        return _first_untracked(self, self._snapshot, self._raw)


def _conditions_of(raw: Dict[str, Any]) -> List[Dict[str, Any]]:
    s = raw.get("status")
    lst = s.get("conditions") if isinstance(s, dict) else None
    return [c for c in lst if isinstance(c, dict)] if isinstance(lst, list) else []


def _first_untracked(node: Node, before: Dict[str, Any], after: Dict[str, Any]) -> Optional[str]:
    def obj(d: Any, key: str) -> Dict[str, Any]:
        v = d.get(key) if isinstance(d, dict) else None
        return v if isinstance(v, dict) else {}

    for key in set(before) | set(after):
        if key not in ("metadata", "status") and before.get(key) != after.get(key):
            return key
    mb, ma = obj(before, "metadata"), obj(after, "metadata")
    for key in set(mb) | set(ma):
        if mb.get(key) == ma.get(key):
            continue
        if key in ("labels", "annotations"):
            written = node._maps.get(("metadata", key), {})
            b, a = obj(mb, key), obj(ma, key)
            for k in set(b) | set(a):
                if b.get(k) != a.get(k) or (k in b) != (k in a):
                    if k not in written:
                        return f"metadata.{key}[{k}]"
        else:
            return f"metadata.{key}"
    sb, sa = obj(before, "status"), obj(after, "status")
    for key in set(sb) | set(sa):
        if sb.get(key) == sa.get(key) and (key in sb) == (key in sa) or key in node._claims:
            continue
        if key == "conditions":
            cb = {c.get("type"): c for c in _conditions_of(before)}
            ca = {c.get("type"): c for c in _conditions_of(after)}
            for t in set(cb) | set(ca):
                if cb.get(t) != ca.get(t) and t not in node._conditions:
                    return f"status.conditions[{t}]"
        elif key in KEYED_STATUS:
            written = node._maps.get(("status", key), {})
            b, a = obj(sb, key), obj(sa, key)
            for k in set(b) | set(a):
                if (b.get(k) != a.get(k) or (k in b) != (k in a)) and k not in written:
                    return f"status.{key}[{k}]"
        else:
            return f"status.{key}"
    return None

def _quantity_str(q: Union[Quantity, str, int]) -> str:
    if isinstance(q, Quantity):
        return str(q)
    if isinstance(q, bool):
        raise TypeError("a quantity is not a bool")
    if isinstance(q, int):
        return str(Quantity.units(q))
    if isinstance(q, str):
        # Canonical, as the API server stores it: a caller's own spelling
        # ("1000m") would differ from the node's ("1") on every pass.
        return str(Quantity.parse(q))
    raise TypeError(f"not a quantity: {q!r}")

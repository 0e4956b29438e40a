"""The Node: labels, annotations, capacity, nodeInfo, addresses and conditions
(with the kubelet's heartbeat and transition rules)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import timestamps
from .condition import Condition, ConditionStatus, Transition
from .errors import Error
from .quantity import Quantity


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

    def _get_in(self, section: str, map_: str, key: str) -> Optional[str]:
        v = (self._map(section, map_) or {}).get(key)
        return v if isinstance(v, str) else None

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
        return self._get_in("metadata", "labels", key)

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
        return self._get_in("metadata", "annotations", key)

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
        # Canonical, as the API server stores it: a caller's own spelling
        # ("1000m") would differ from the node's ("1") on every pass.
        return str(Quantity.parse(q))
    raise TypeError(f"not a quantity: {q!r}")

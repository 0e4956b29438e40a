"""Node conditions: their status, their JSON shape, and what setting one did."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Dict, Optional


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

"""RFC 3339 times, as a condition's times are written (``metav1.Time``)."""

from __future__ import annotations

import time
from typing import Union


def rfc3339(seconds: Union[int, float]) -> str:
    """``seconds`` since the Unix epoch as ``2026-01-02T03:04:05Z`` (UTC, whole
    seconds: a fraction is dropped)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(seconds)))


def now() -> str:
    """The current time as a condition's times are written:
    ``2026-01-02T03:04:05Z`` (RFC 3339, UTC, seconds)."""
    return rfc3339(time.time())

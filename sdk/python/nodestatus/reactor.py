"""Setters that react to what happens on the machine (WIT 0.2.1's
``reactor``, world ``reactor-plugin``): the kernel log, a log file, the
journal, and granted paths that change.

Write ``subscribe(self) -> Subscriptions`` and ``on_lines(self, node,
lines) -> None`` beside ``metadata`` and ``set`` in your
:class:`~nodestatus.Plugin` subclass, and name it for both exports:
``Reactor = Setter``. The host reads the streams, matches the patterns
itself, and calls ``on_lines`` with the matches within a second; what it
writes on the node is the plugin's part, as in ``set``. Build it against
the world ``reactor-plugin`` (``scripts/guests/python.sh`` does so for an
``app.py`` that binds ``Reactor``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

KMSG = "kmsg"
FILE = "file"
JOURNAL = "journal"


@dataclass
class Stream:
    """One stream a plugin follows. The operator grants its source in the
    plugin's ``streams`` (``kmsg``, ``journal``, or the file's path)."""

    name: str
    """The plugin's name for it; each match names it."""
    source: str = KMSG
    """:data:`KMSG` (the kernel log), :data:`FILE` (``path``, followed as
    ``tail -F`` follows it) or :data:`JOURNAL` (``units``)."""
    patterns: List[str] = field(default_factory=list)
    """Regular expressions (RE2's syntax), at most 256; a line is handed over
    once per pattern that matches, with its index."""
    span: int = 1
    """How many lines one pattern may span, 1 to 64."""
    lookback_seconds: int = 0
    """How far back to start; 0: from now on."""
    extract: Optional[str] = None
    """Takes each line's message out (its first group) before matching."""
    path: str = ""
    """:data:`FILE`: the file's absolute path."""
    units: List[str] = field(default_factory=list)
    """:data:`JOURNAL`: units or identifiers (all entries when empty)."""

    @classmethod
    def kmsg(cls, name: str, patterns: Sequence[str], **kw: Any) -> "Stream":
        """The kernel log."""
        return cls(name, KMSG, list(patterns), **kw)

    @classmethod
    def file(cls, name: str, path: str, patterns: Sequence[str], **kw: Any) -> "Stream":
        """A log file at ``path``."""
        return cls(name, FILE, list(patterns), path=path, **kw)

    @classmethod
    def journal(cls, name: str, units: Sequence[str], patterns: Sequence[str], **kw: Any) -> "Stream":
        """The journal's entries of ``units`` (all when empty)."""
        return cls(name, JOURNAL, list(patterns), units=list(units), **kw)


@dataclass
class Subscriptions:
    """What a plugin follows."""

    streams: List[Stream] = field(default_factory=list)
    watch: List[str] = field(default_factory=list)
    """Granted paths whose change calls ``set`` at once."""


@dataclass
class Match:
    """One matched line (or lines, for a pattern that spans several)."""

    stream: str
    pattern: int
    """The index of the pattern that matched."""
    text: str
    """What matched; cut at 64 KiB."""
    time_ms: int
    """When it was written, ms since the Unix epoch."""


@dataclass
class Lines:
    """The matches of one call, oldest first, and how many the host dropped
    since the last call (the plugin's queue was full)."""

    matches: List[Match] = field(default_factory=list)
    dropped: int = 0

    @classmethod
    def of(cls, stream: str, pattern: int, *texts: str) -> "Lines":
        """What the host would hand over for ``texts``, each matched by
        ``pattern`` of ``stream``, written now: a test helper."""
        now = int(time.time() * 1000)
        return cls([Match(stream, pattern, t, now) for t in texts])


def _to_wire(s: Subscriptions, reactor: Any) -> Any:
    """The bindings' ``Subscriptions``."""
    if not isinstance(s, Subscriptions):
        raise TypeError(f"subscribe() must return nodestatus.Subscriptions, not {type(s).__name__}")
    streams = []
    for st in s.streams:
        if st.source == KMSG:
            source: Any = reactor.Source_Kmsg()
        elif st.source == FILE:
            source = reactor.Source_File(st.path)
        elif st.source == JOURNAL:
            source = reactor.Source_Journal(list(st.units))
        else:
            raise ValueError(f"stream {st.name!r}: source {st.source!r} is not kmsg, file or journal")
        streams.append(
            reactor.Stream(
                name=st.name,
                source=source,
                patterns=list(st.patterns),
                span=st.span,
                extract=st.extract,
                lookback_seconds=st.lookback_seconds,
            )
        )
    return reactor.Subscriptions(streams=streams, watch=list(s.watch))


def _from_wire(batch: Any) -> Lines:
    """The SDK's :class:`Lines` of the bindings' ``Batch`` (or of a
    :class:`Lines`, natively)."""
    if isinstance(batch, Lines):
        return batch
    return Lines([Match(m.stream, m.pattern, m.text, m.time_ms) for m in batch.matches], batch.dropped)

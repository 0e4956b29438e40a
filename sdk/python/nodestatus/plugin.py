"""The plugin adapter: :class:`Plugin` turns ``metadata()`` and ``set(node)``
into the WIT world's ``setter`` export."""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass, field
from typing import Any, List, Optional

from ._bindings import _bindings
from .errors import Error
from .host import _granted, _Native, _normalize, host
from .node import Node
from .reactor import Lines, _from_wire, _to_wire


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
        # In a component, a path outside every granted directory does not
        # exist: say that it may be a missing grant, not a missing file.
        if (
            isinstance(e, FileNotFoundError)
            and isinstance(e.filename, str)
            and e.filename.startswith("/")
            and not _granted(_normalize(e.filename))
        ):
            where += (
                " (not inside a directory granted to this plugin: ask for it in Metadata.paths,"
                " and the operator grants it in plugins.<name>.paths)"
            )
        return f"{e.strerror}{where}"
    text = str(e)
    message = f"{type(e).__name__}: {text}" if text else type(e).__name__
    if isinstance(e, ModuleNotFoundError):
        # componentize-py keeps only the modules imported at build time.
        message += " (import every module at the top of the plugin's module, not inside set())"
    return message


def run_lines(on_lines_fn: Any, node_json: str, lines: Lines) -> str:
    """:func:`run` for a reactor's ``on_lines``: ``on_lines_fn(node,
    lines)`` over the Node's JSON, and the part it wrote as JSON text. Tests
    call it with :meth:`Lines.of` to feed lines, as the host would hand them
    over."""
    return run(lambda node: on_lines_fn(node, lines), node_json)


def run(set_fn: Any, node_json: str) -> str:
    """Runs a setter function over a Node's JSON: parse, ``set_fn(node)``,
    and returns the setter's part of the node as JSON text (what a 0.2 setter
    returns: :meth:`Node.part`). Raises :class:`Error` with the message the
    host would get. :func:`nodestatus.testing.merge_part` shows the node as
    the host would have it after merging the part."""
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
    where = node._untracked_change()
    if where is not None:
        raise Error(
            f"the setter changed {where} in node.raw (or in a value that node.status() or "
            "node.metadata() returned): the SDK cannot tell which fields it sets; change it with "
            "the Node's helpers (set_label, set_condition, set_capacity, ...) or node.status_mut()"
        )
    part = node.part_json()
    fake = _Native.fake
    if fake is not None:
        fake.parts.append(json.loads(part))
    return part


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


def _wire_set(self: Any, node_json: Any) -> Optional[str]:
    if isinstance(node_json, Node):  # the plugin's own call, from on_lines
        return type(self)._ns_set(self, node_json)
    try:
        return run(lambda node: type(self)._ns_set(self, node), node_json)
    except Error as e:
        b = _bindings()
        if b is None:
            raise
        raise b.Err(str(e)) from None


def _wire_subscribe(self: Any) -> Any:
    s = type(self)._ns_subscribe(self)
    b = _bindings()
    if b is None:
        _to_wire(s, _NativeWire)  # the checks a component makes
        return s
    if b.reactor is None:
        raise TypeError("subscribe() in a component of the world plugin: build it with -w reactor-plugin")
    return _to_wire(s, b.reactor)


def _wire_on_lines(self: Any, node_json: str, batch: Any) -> Optional[str]:
    lines = _from_wire(batch)
    try:
        return run(lambda node: type(self)._ns_on_lines(self, node, lines), node_json)
    except Error as e:
        b = _bindings()
        if b is None:
            raise
        raise b.Err(str(e)) from None


class _NativeWire:
    """Stands in for the bindings' reactor types natively, so that
    ``subscribe()`` checks what it returns there as in a component."""

    @staticmethod
    def Source_Kmsg() -> Any:
        return None

    @staticmethod
    def Source_File(path: str) -> Any:
        return path

    @staticmethod
    def Source_Journal(units: Any) -> Any:
        return units

    @staticmethod
    def Stream(**kw: Any) -> Any:
        return kw

    @staticmethod
    def Subscriptions(**kw: Any) -> Any:
        return kw


class Plugin:
    """Base class of a setter. Subclass it as ``Setter`` (the name
    componentize-py looks for, after the exported interface ``setter``) and
    write two methods:

    - ``metadata(self) -> Metadata``: called once at load, with no grants; it
      must not read files or the environment;
    - ``set(self, node: Node) -> None``: change the node in place; raise
      :class:`Error` (or any exception) to fail this pass with its message.

    The class turns them into the WIT functions (``nodestatus:plugin@0.2.1``):
    ``metadata`` returns the bindings' ``PluginInfo``, and ``set`` takes the
    Node's JSON and returns the setter's part of it (``some(part)``: the
    fields ``set(node)`` wrote, :meth:`Node.part`), or raises
    ``Err(message)`` for the ``result<option<string>, string>``. Natively
    ``Setter().set(json)`` does the same but raises :class:`Error`, and
    ``Setter().metadata()`` returns the :class:`Metadata`;
    :func:`nodestatus.testing.apply` gives the node as the host would have
    it after merging the part.

    A reactor (WIT 0.2.1, world ``reactor-plugin``) also writes
    ``subscribe(self) -> Subscriptions`` (once at load, with the config
    readable: what it follows) and ``on_lines(self, node: Node, lines:
    Lines) -> None`` (the matched lines; it writes the plugin's part as
    ``set`` does), and binds the class for the second export too:
    ``Reactor = Setter`` (:mod:`nodestatus.reactor`). Natively
    ``Setter().on_lines(json, Lines.of(...))`` returns the part.
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
        if "subscribe" in own:
            cls._ns_subscribe = own["subscribe"]
            cls.subscribe = _wire_subscribe  # type: ignore[attr-defined]
        if "on_lines" in own:
            cls._ns_on_lines = own["on_lines"]
            cls.on_lines = _wire_on_lines  # type: ignore[attr-defined]

    def metadata(self) -> Metadata:  # pragma: no cover - replaced in subclasses
        raise NotImplementedError("a nodestatus plugin must define metadata()")

    def set(self, node: Node) -> None:  # pragma: no cover - replaced in subclasses
        raise NotImplementedError("a nodestatus plugin must define set(node)")

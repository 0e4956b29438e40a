"""The componentize-py bindings, imported lazily: natively (under
``python3 -m unittest``) they are absent and the SDK answers from this
machine. They are generated at build time from the ``wit/`` directory
(world ``nodestatus:plugin/plugin@0.2.1``): ``wit_world.exports.setter``
(whose ``set`` returns ``Optional[str]``, the part, or raises ``Err``) and
``wit_world.imports.host`` (``nodestatus:plugin/host@0.1.1``); for a
reactor (world ``reactor-plugin``) also ``wit_world.exports.reactor``
(``reactor`` is ``None`` otherwise)."""

from __future__ import annotations

from typing import Any

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
            try:
                from wit_world.exports import reactor  # type: ignore
            except ImportError:  # the world plugin
                reactor = None
            _BINDINGS.reactor = reactor
    return _BINDINGS or None


# Imported now, so that componentize-py's build-time snapshot holds them.
_bindings()

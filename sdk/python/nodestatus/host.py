"""The host's functions (log, config, events, machine facts, files). Inside a
component they call the host; natively they answer from this machine, or from
the fake host that :mod:`nodestatus.testing` installs."""

from __future__ import annotations

import enum
import json
import os
import sys
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

from ._bindings import _bindings
from .errors import Error

if TYPE_CHECKING:
    from .testing import FakeHost


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


def _read_capped(f: Any, limit: int) -> bytes:
    """At most ``limit`` bytes of ``f``, read in chunks of 64 KiB: a single
    read of the whole limit fails on ``/proc/sys`` files, whose handler
    allocates a buffer of the size asked for (ENOMEM above 4 MiB)."""
    chunks: List[bytes] = []
    left = limit
    while left > 0:
        chunk = f.read(min(left, 64 << 10))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


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
                    data = _read_capped(f, max_bytes + 1)
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

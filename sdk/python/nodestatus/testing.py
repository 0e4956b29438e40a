"""A fake host for native unit tests: :func:`fake_host` serves the host
functions of :mod:`nodestatus.host` from a config, files and machine facts
that the test gives, and records what the setter logged and recorded, as the
JavaScript SDK's ``testing.js`` does."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Union

from .host import _Native, _normalize


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

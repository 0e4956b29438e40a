"""{{name}}: a nodestatus setter. It labels the node with its kernel's
major.minor version, read from a file; change ``set`` to report what you need.

A setter reads only the directories it asks for in its metadata and the
operator grants (``config.yaml`` holds the grant). Build, test and check it
with ``./build.sh``."""

import re
from typing import Optional

import nodestatus
from nodestatus import Error, Metadata, Node, host

LABEL = "{{name}}.nodestatus.io/kernel"

#: The file it reads, in the directory it asks for.
RELEASE_FILE = "{{grant}}/osrelease"


def major_minor(release: str) -> Optional[str]:
    """The kernel's ``major.minor``, from a release such as ``6.1.0-18-amd64``."""
    m = re.match(r"^(\d+)\.(\d+)", release)
    return f"{m.group(1)}.{m.group(2)}" if m else None


class Setter(nodestatus.Plugin):
    def metadata(self) -> Metadata:
        return Metadata(
            "{{name}}",
            "0.1.0",
            description="labels the node with its kernel's major.minor version",
            # The directory of RELEASE_FILE; config.yaml grants it.
            paths=["{{grant}}"],
        )

    def set(self, node: Node) -> None:
        release = host.read_file(RELEASE_FILE).strip()
        version = major_minor(release)
        if version is None:
            raise Error(f"cannot read a version from the kernel release {release!r}")
        node.set_label(LABEL, version)

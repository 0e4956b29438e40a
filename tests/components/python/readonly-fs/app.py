"""readonly-fs: a ReadonlyFilesystem condition and a Warning event when the
kernel remounts a filesystem read-only ("EXT4-fs (sda1): Remounting
filesystem read-only")."""

import nodestatus
from nodestatus import ConditionStatus, Lines, Metadata, Node, Stream, Subscriptions, host


class Setter(nodestatus.Plugin):
    def metadata(self) -> Metadata:
        return Metadata("readonly-fs", "0.1.0", description="ReadonlyFilesystem condition from the kernel log")

    def set(self, node: Node) -> None:
        """Each pass: the condition as the node holds it (on_lines set it),
        False until a filesystem turns read-only."""
        c = node.condition("ReadonlyFilesystem")
        if c is not None:
            node.set_condition("ReadonlyFilesystem", ConditionStatus(c.status), c.reason, c.message)
        else:
            node.set_condition("ReadonlyFilesystem", ConditionStatus.FALSE, "FilesystemIsNotReadOnly")

    def subscribe(self) -> Subscriptions:
        """Once at load: the kernel log, and the pattern the operator's
        config may replace ({"pattern": "..."})."""
        pattern = host.config().get("pattern", r"Remounting filesystem read-only")
        return Subscriptions([Stream.kmsg("kernel", [pattern])])

    def on_lines(self, node: Node, lines: Lines) -> None:
        """Within a second of a matching kernel message."""
        self.set(node)
        for m in lines.matches:
            node.set_condition("ReadonlyFilesystem", ConditionStatus.TRUE, "ReadonlyFilesystem", m.text)
            host.record_event("Warning", "ReadonlyFilesystem", m.text)


# The class serves both exports: setter and reactor.
Reactor = Setter

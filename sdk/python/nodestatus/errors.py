"""The error a setter raises."""

class Error(Exception):
    """An error a setter raises; the host reports its message."""

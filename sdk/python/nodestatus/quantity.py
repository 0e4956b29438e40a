"""Kubernetes resource quantities, exact to the milli-unit."""

from __future__ import annotations

import re
from typing import Tuple

from .errors import Error

_BINARY = (("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60))
_DECIMAL = (
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
)
_EXP = re.compile(r"[+-]?[0-9]+\Z")
_I128_MAX = (1 << 127) - 1


class Quantity:
    """A Kubernetes resource quantity (``2``, ``1500m``, ``16Gi``, ``100M``),
    held exactly in thousandths of a unit, written the way the API server
    writes it.

    ``format`` is ``"BinarySI"`` (powers of 1024: ``Ki``, ``Mi``, ...) or
    ``"DecimalSI"`` (powers of 1000: ``m``, ``k``, ``M``, ...).
    """

    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"

    __slots__ = ("_millis", "_format")

    def __init__(self, millis: int, format: str = DECIMAL_SI) -> None:
        if format not in (self.BINARY_SI, self.DECIMAL_SI):
            raise ValueError(f"format must be BinarySI or DecimalSI, not {format!r}")
        self._millis = int(millis)
        self._format = format

    @classmethod
    def units(cls, n: int) -> "Quantity":
        """Whole units, written in decimal (``cpu``, ``pods``)."""
        return cls(int(n) * 1000, cls.DECIMAL_SI)

    @classmethod
    def millis(cls, m: int) -> "Quantity":
        """Thousandths of a unit (``1500m`` CPU)."""
        return cls(int(m), cls.DECIMAL_SI)

    @classmethod
    def bytes(cls, b: int) -> "Quantity":
        """A byte count, written in binary units (``memory``)."""
        return cls(int(b) * 1000, cls.BINARY_SI)

    @classmethod
    def parse(cls, s: str) -> "Quantity":
        """Parses the API server's quantity syntax. Sub-milli fractions round
        up, as the API server does. Raises :class:`Error` on bad input."""

        def err() -> Error:
            return Error(f"{s!r} is not a quantity (for example 2, 500m, 16Gi, 1.5G)")

        if not isinstance(s, str):
            raise err()
        # ASCII whitespace only, as the other SDKs trim it (Kubernetes
        # itself refuses any).
        t = s.strip(" \t\r\n")
        if not t or len(t) > 64:
            raise err()
        end = 0
        while end < len(t) and (t[end].isascii() and (t[end].isdigit() or t[end] in ".+-")):
            end += 1
        num, suffix = t[:end], t[end:]
        neg = num.startswith("-")
        digits = num[1:] if num[:1] in ("-", "+") else num
        whole, _, frac = digits.partition(".")
        if (not whole and not frac) or not _ascii_digits(whole) or not _ascii_digits(frac):
            raise err()
        binary = dict(_BINARY)
        decimal = dict(_DECIMAL)
        if not suffix:
            dec_exp, bin_exp, fmt = 0, 0, cls.DECIMAL_SI
        elif suffix in binary:
            dec_exp, bin_exp, fmt = 0, binary[suffix], cls.BINARY_SI
        elif suffix in decimal:
            dec_exp, bin_exp, fmt = decimal[suffix], 0, cls.DECIMAL_SI
        elif suffix[0] in "eE" and _EXP.match(suffix[1:]):
            dec_exp, bin_exp, fmt = int(suffix[1:]), 0, cls.DECIMAL_SI
        else:
            raise err()
        mantissa = int((whole + frac).lstrip("0") or "0")
        exp10 = dec_exp + 3 - len(frac)
        if exp10 >= 0:
            if exp10 > 38:
                raise err()
            scaled = mantissa * 10**exp10
        else:
            if -exp10 > 38:
                raise err()
            p = 10 ** (-exp10)
            scaled = (mantissa + p - 1) // p  # round up, as resource.Quantity does
        scaled <<= bin_exp
        if scaled > _I128_MAX:
            raise err()
        return cls(-scaled if neg else scaled, fmt)

    @property
    def format(self) -> str:
        """``"BinarySI"`` or ``"DecimalSI"``."""
        return self._format

    def as_millis(self) -> int:
        """The value in thousandths of a unit."""
        return self._millis

    def as_units_ceil(self) -> int:
        """The value in whole units, rounded up."""
        return -((-self._millis) // 1000)

    def add(self, other: "Quantity") -> "Quantity":
        """``self + other``, in this quantity's format."""
        return Quantity(self._millis + other._millis, self._format)

    def saturating_sub(self, other: "Quantity") -> "Quantity":
        """``self - other``, never below zero (the kubelet's allocatable
        rule)."""
        return Quantity(max(self._millis - other._millis, 0), self._format)

    def __str__(self) -> str:
        """The canonical form: the largest suffix that writes the value as a
        whole number. As Kubernetes does, a binary quantity under 1Ki is
        written in decimal (``1000`` bytes is ``1k``)."""
        m = self._millis
        if m % 1000 != 0:
            return f"{m}m"
        units = _trunc_div(m, 1000)
        if units == 0:
            return "0"
        if self._format == self.BINARY_SI and abs(units) >= 1024:
            for name, exp in reversed(_BINARY):
                d = 1 << exp
                if _trunc_rem(units, d) == 0:
                    return f"{_trunc_div(units, d)}{name}"
            return str(units)
        for name, exp in reversed(_DECIMAL):
            if exp <= 0:
                continue
            d = 10**exp
            if _trunc_rem(units, d) == 0:
                return f"{_trunc_div(units, d)}{name}"
        return str(units)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def _key(self) -> Tuple[int, str]:
        return (self._millis, self._format)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: "Quantity") -> bool:
        return self._key() < other._key()

    def __le__(self, other: "Quantity") -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: "Quantity") -> bool:
        return self._key() > other._key()

    def __ge__(self, other: "Quantity") -> bool:
        return self._key() >= other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _ascii_digits(s: str) -> bool:
    return all("0" <= c <= "9" for c in s)


def _trunc_div(a: int, b: int) -> int:
    """Integer division rounding toward zero, like Rust's ``/``."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _trunc_rem(a: int, b: int) -> int:
    return a - b * _trunc_div(a, b)

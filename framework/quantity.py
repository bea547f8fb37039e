"""Quantities, durations and timestamps, turned into integers once.

This module is the only parser of any of the three. Everything downstream
works on plain ``int``:

* cpu-like resources are counted in milli-units (``500m`` -> 500, ``2`` -> 2000),
* every other resource in whole units, rounded up (``1Gi`` -> 1073741824,
  ``1.5`` GPUs -> 2), which is what Kubernetes does with ``Quantity.Value()``,
* durations and timestamps in milliseconds.
"""

from __future__ import annotations

import datetime as _dt
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

__all__ = [
    "MILLI_RESOURCES",
    "QuantityError",
    "format_duration",
    "format_quantity",
    "format_timestamp",
    "parse_duration",
    "parse_quantity",
    "parse_timestamp",
]

# Resources whose natural unit is fractional; Kueue accounts these in milli-units.
MILLI_RESOURCES = frozenset({"cpu"})

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[numkMGTPE])?)$"
)


class QuantityError(ValueError):
    """A quantity, duration or timestamp that cannot be parsed."""


def parse_quantity(value: object, resource: str = "") -> int:
    """Parse a Kubernetes quantity for ``resource`` into an integer amount.

    Raises :class:`QuantityError` for malformed or negative values.
    """
    if isinstance(value, bool):
        raise QuantityError(f"expected a quantity, got {value!r}")
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        number = Decimal(repr(value))
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("-"):
            raise QuantityError(f"negative quantity {value!r}")
        match = _QUANTITY.match(text)
        if match is None:
            raise QuantityError(f"malformed quantity {value!r}")
        try:
            number = Decimal(match["num"])
        except InvalidOperation as exc:  # pragma: no cover - the regex admits only digits
            raise QuantityError(f"malformed quantity {value!r}") from exc
        if match["bin"]:
            number *= _BINARY[match["bin"]]
        elif match["exp"]:
            number = number.scaleb(int(match["exp"][1:]))
        else:
            number *= _DECIMAL[match["dec"] or ""]
    else:
        raise QuantityError(f"expected a quantity, got {type(value).__name__}")
    if number < 0:
        raise QuantityError(f"negative quantity {value!r}")
    if resource in MILLI_RESOURCES:
        number *= 1000
    return int(number.to_integral_value(rounding=ROUND_CEILING))


def format_quantity(amount: int, resource: str = "") -> str:
    """Render an integer amount back in Kubernetes notation (for messages)."""
    if resource in MILLI_RESOURCES:
        if amount % 1000 == 0:
            return str(amount // 1000)
        return f"{amount}m"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if amount >= unit and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)


_DURATION_UNITS = {
    "ns": Decimal("1e-6"),
    "us": Decimal("1e-3"),
    "µs": Decimal("1e-3"),
    "ms": Decimal(1),
    "s": Decimal(1000),
    "m": Decimal(60_000),
    "h": Decimal(3_600_000),
    "d": Decimal(86_400_000),
    "w": Decimal(604_800_000),
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w)")


def parse_duration(value: object) -> int:
    """Parse a Go-style duration (``90s``, ``1h30m``, ``2d4h``, ``1w``) into milliseconds.

    A bare number is rejected: ``"600"`` could mean seconds or nanoseconds, and
    a silent guess is how a protection window becomes zero.
    """
    if isinstance(value, bool) or not isinstance(value, str):
        raise QuantityError(
            f"expected a duration string with a unit such as '90s', got {value!r}"
        )
    text = value.strip()
    if text.startswith("-"):
        raise QuantityError(f"negative duration {value!r}")
    if text.startswith("+"):
        text = text[1:]
    if not text:
        raise QuantityError("empty duration")
    position = 0
    total = Decimal(0)
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        total += Decimal(match[1]) * _DURATION_UNITS[match[2]]
        position = match.end()
    if position != len(text):
        raise QuantityError(
            f"malformed duration {value!r} (use units like 90s, 5m, 1h30m, 2d, 1w)"
        )
    return int(total.to_integral_value(rounding=ROUND_CEILING))


def format_duration(ms: int) -> str:
    """Render milliseconds as a compact Go-style duration (``1h30m``, ``0s``)."""
    if ms == 0:
        return "0s"
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    parts = []
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size:
            parts.append(f"{ms // size}{unit}")
            ms %= size
    if ms:
        parts.append(f"{ms}ms")
    return sign + "".join(parts)


def parse_timestamp(value: object) -> int:
    """Parse an RFC 3339 timestamp into milliseconds since the epoch (UTC)."""
    if isinstance(value, _dt.datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = _dt.datetime.fromisoformat(text)
        except ValueError as exc:
            raise QuantityError(f"malformed timestamp {value!r} (expected RFC 3339)") from exc
    else:
        raise QuantityError(f"expected an RFC 3339 timestamp, got {value!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    delta = moment - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def format_timestamp(ms: int) -> str:
    """Render milliseconds since the epoch as RFC 3339 in UTC (``...Z``)."""
    moment = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(milliseconds=ms)
    if ms % 1000:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

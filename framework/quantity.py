"""Quantities, durations and timestamps, turned into integers once.

This module is the only parser of any of the three. Everything downstream
works on plain ``int``:

* cpu-like resources are counted in milli-units (``500m`` -> 500, ``2`` -> 2000),
* every other resource in whole units, rounded up (``1Gi`` -> 1073741824,
  ``1.5`` GPUs -> 2), which is what Kubernetes does with ``Quantity.Value()``,
* durations and timestamps in milliseconds.

Bounds. Kubernetes documents that no quantity may be larger than 2^63 - 1
(its own arithmetic works on 64-bit integers and saturates beyond), so the
rule here is: the integer a quantity becomes, in the unit stored above
(milli-units for cpu, whole units otherwise), must fit a signed 64-bit
integer. Anything larger (``1e4300``, ``99999999999999999999999Ei``, a YAML
float ``1e300``) is an error, as is a non-finite value (``.inf``, ``.nan``);
it is never capped, because a capped request or quota is a silent guess. A
non-zero value too small to count (``1e-10000000``) rounds up to one unit, as
in Kubernetes. Durations follow the same rule in milliseconds. The magnitude
is checked before any arithmetic, so an exponent of any size costs nothing.
"""

from __future__ import annotations

import datetime as _dt
import re
from decimal import ROUND_CEILING, Context, Decimal, localcontext

__all__ = [
    "MAX_AMOUNT",
    "MILLI_RESOURCES",
    "QuantityError",
    "forget_parsed",
    "format_duration",
    "format_quantity",
    "format_timestamp",
    "parse_duration",
    "parse_quantity",
    "parse_timestamp",
    "parse_timestamp_once",
]

# The largest amount (and duration in milliseconds) accepted: a signed 64-bit integer.
MAX_AMOUNT = 2**63 - 1
# Decimal digits of MAX_AMOUNT (19): a value whose leading digit is at 10^19 or
# beyond cannot fit, one at 10^-40 or below rounds up to the smallest unit.
_MAX_MAGNITUDE = 19
_MIN_MAGNITUDE = -40

# Resources whose natural unit is fractional; Kueue accounts these in milli-units.
MILLI_RESOURCES = frozenset({"cpu"})

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
# Decimal suffixes as powers of ten.
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"^(?P<num>[+]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[numkMGTPE])?)$"
)


class QuantityError(ValueError):
    """A quantity, duration or timestamp that cannot be parsed."""


# Memos of the texts already parsed: a cluster repeats a handful of quantities ("8", "16Gi")
# and timestamps hundreds of thousands of times. Only successes are kept (an error is raised
# afresh, with its own message); a memo that grows past its bound is emptied, so a stream
# of distinct texts costs no more than parsing them.
_MEMO_BOUND = 65_536
_QUANTITIES: dict[tuple[str, bool], int] = {}
_TIMESTAMPS: dict[str, int] = {}


def forget_parsed() -> None:
    """Empty the memos of parsed quantities and timestamps (a program that reads no more
    objects lets their texts go: a large snapshot's timestamps are megabytes of them)."""
    _QUANTITIES.clear()
    _TIMESTAMPS.clear()


def parse_quantity(value: object, resource: str = "") -> int:
    """Parse a Kubernetes quantity for ``resource`` into an integer amount.

    Raises :class:`QuantityError` for malformed, negative, non-finite or
    too large values (see the module docstring for the bound).
    """
    if type(value) is not str:
        return _parse_quantity(value, resource)
    key = (value, resource in MILLI_RESOURCES)
    found = _QUANTITIES.get(key)
    if found is None:
        found = _parse_quantity(value, resource)
        if len(_QUANTITIES) >= _MEMO_BOUND:
            _QUANTITIES.clear()
        _QUANTITIES[key] = found
    return found


def _parse_quantity(value: object, resource: str) -> int:
    exponent = 0  # a power of ten applied to ``number``
    factor = 1  # a binary suffix's power of two
    if isinstance(value, bool):
        raise QuantityError(f"expected a quantity, got {_shown(value)}")
    milli = resource in MILLI_RESOURCES
    if type(value) is int and 0 <= value <= MAX_AMOUNT:  # the common case, in integers
        plain: int = value * 1000 if milli else value
        if plain <= MAX_AMOUNT:
            return plain
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"not a finite quantity: {value!r}")
        number = Decimal(repr(value))
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("-"):
            raise QuantityError(f"negative quantity {_shown(value)}")
        match = _QUANTITY.match(text)
        if match is None:
            raise QuantityError(f"malformed quantity {_shown(value)}")
        if match["bin"]:
            factor = _BINARY[match["bin"]]
        elif match["exp"]:
            exponent = _exponent(match["exp"][1:])
        else:
            exponent = _DECIMAL[match["dec"] or ""]
        digits = match["num"].lstrip("+")
        if digits.isdigit() and len(digits) <= 20 and -30 < exponent < 30:
            # The common case ("2", "500m", "16Gi"), exactly in integers.
            whole = _integer_amount(int(digits), exponent + 3 if milli else exponent, factor)
            if whole <= MAX_AMOUNT:
                return whole
            raise _too_large(value, milli)
        number = Decimal(match["num"])
    else:
        raise QuantityError(f"expected a quantity, got {type(value).__name__}")
    if number < 0:
        raise QuantityError(f"negative quantity {_shown(value)}")
    if milli:
        exponent += 3
    amount = _bounded_integer(number, exponent, factor)
    if amount is None:
        raise _too_large(value, milli)
    return amount


def _too_large(value: object, milli: bool) -> QuantityError:
    unit = "milli-units" if milli else "units"
    return QuantityError(
        f"quantity {_shown(value)} is too large: at most {MAX_AMOUNT} {unit} "
        "(a signed 64-bit integer, as Kubernetes counts)"
    )


def _integer_amount(number: int, exponent: int, factor: int) -> int:
    """``ceil(number * factor * 10**exponent)`` in integers, for a small ``exponent``."""
    scaled = number * factor
    power: int = 10 ** abs(exponent)  # pow's type depends on the exponent's sign
    if exponent >= 0:
        return scaled * power
    return -(-scaled // power)


def _exponent(digits: str) -> int:
    """The exponent of ``1e<digits>``, clamped far past both bounds (it may have any length)."""
    sign = -1 if digits.startswith("-") else 1
    digits = digits.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 6:
        return sign * 10**6
    return sign * int(digits)


def _bounded_integer(number: Decimal, exponent: int, factor: int = 1) -> int | None:
    """``ceil(number * factor * 10**exponent)`` for a finite ``number >= 0``, ``factor`` up
    to 2^60; None beyond MAX_AMOUNT."""
    if number == 0:
        return 0
    magnitude = number.adjusted() + exponent + len(str(factor)) - 1
    if magnitude >= _MAX_MAGNITUDE:
        return None
    if magnitude <= _MIN_MAGNITUDE:
        return 1
    # Exact arithmetic: enough digits for every digit of the number and the shift.
    digits = len(number.as_tuple().digits) + abs(exponent) + _MAX_MAGNITUDE + 2
    with localcontext(Context(prec=digits, Emax=10**7, Emin=-(10**7))):
        exact = (number * factor).scaleb(exponent)
        amount = int(exact.to_integral_value(rounding=ROUND_CEILING))
    return amount if amount <= MAX_AMOUNT else None


def _shown(value: object) -> str:
    """``repr`` of a value for a message, cut short (an input may be megabytes long)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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


# unit -> (power of ten, factor) giving milliseconds
_DURATION_UNITS = {
    "ns": (-6, 1),
    "us": (-3, 1),
    "µs": (-3, 1),
    "ms": (0, 1),
    "s": (0, 1000),
    "m": (0, 60_000),
    "h": (0, 3_600_000),
    "d": (0, 86_400_000),
    "w": (0, 604_800_000),
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w)")


def parse_duration(value: object) -> int:
    """Parse a Go-style duration (``90s``, ``1h30m``, ``2d4h``, ``1w``) into milliseconds.

    A bare number is rejected: ``"600"`` could mean seconds or nanoseconds, and
    a silent guess is how a protection window becomes zero.
    """
    if isinstance(value, bool) or not isinstance(value, str):
        raise QuantityError(
            f"expected a duration string with a unit such as '90s', got {_shown(value)}"
        )
    text = value.strip()
    if text.startswith("-"):
        raise QuantityError(f"negative duration {_shown(value)}")
    if text.startswith("+"):
        text = text[1:]
    if not text:
        raise QuantityError("empty duration")
    position = 0
    total = 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        part = _bounded_integer(Decimal(match[1]), *_DURATION_UNITS[match[2]])
        total = MAX_AMOUNT + 1 if part is None else total + part
        position = match.end()
    if position != len(text):
        raise QuantityError(
            f"malformed duration {_shown(value)} (use units like 90s, 5m, 1h30m, 2d, 1w)"
        )
    if total > MAX_AMOUNT:
        raise QuantityError(f"duration {_shown(value)} is too long: at most {MAX_AMOUNT} ms")
    return total


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


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_EARLIEST_MS = (_dt.datetime(1, 1, 1, tzinfo=_dt.UTC) - _EPOCH) // _dt.timedelta(milliseconds=1)
_LATEST_MS = (
    _dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=_dt.UTC) - _EPOCH
) // _dt.timedelta(milliseconds=1)


def parse_timestamp(value: object) -> int:
    """Parse an RFC 3339 timestamp into milliseconds since the epoch (UTC); each text is
    parsed once (see :func:`parse_timestamp_once` for texts that seldom repeat)."""
    if type(value) is not str:
        return _parse_timestamp(value)
    found = _TIMESTAMPS.get(value)
    if found is None:
        found = _parse_timestamp(value)
        if len(_TIMESTAMPS) >= _MEMO_BOUND:
            _TIMESTAMPS.clear()
        _TIMESTAMPS[value] = found
    return found


_fromisoformat = _dt.datetime.fromisoformat
_UTC = _dt.UTC


def _parse_timestamp(value: object) -> int:
    if isinstance(value, str):  # the common case first
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = _fromisoformat(text)
        except ValueError as exc:
            raise QuantityError(
                f"malformed timestamp {_shown(value)} (expected RFC 3339)"
            ) from exc
    elif isinstance(value, _dt.datetime):
        moment = value
    else:
        raise QuantityError(f"expected an RFC 3339 timestamp, got {_shown(value)}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_UTC)
    try:
        delta = moment - _EPOCH
    except OverflowError as exc:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise QuantityError(f"timestamp {_shown(value)} is out of range") from exc
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


# :func:`parse_timestamp` without its memo: for texts that seldom repeat (a Workload's
# creation and admission times, each its own), which the memo would only hold and hash.
parse_timestamp_once = _parse_timestamp


_FORMATTED: dict[int, str] = {}


def format_timestamp(ms: int) -> str:
    """Render milliseconds since the epoch as RFC 3339 in UTC (``...Z``).

    A moment outside years 1-9999 (a timestamp plus a very long duration) is
    shown as the nearest one that can be written, never raised on. Explanations name
    the same moments over and over (a protected victim's admission, session after
    session), so each text is kept, as parsed timestamps are.
    """
    found = _FORMATTED.get(ms)
    if found is None:
        if len(_FORMATTED) >= _MEMO_BOUND:
            _FORMATTED.clear()
        found = _FORMATTED[ms] = _format_timestamp(ms)
    return found


def _format_timestamp(ms: int) -> str:
    ms = min(max(ms, _EARLIEST_MS), _LATEST_MS)
    m = _EPOCH + _dt.timedelta(milliseconds=ms)
    # The year in four digits, as RFC 3339 writes it (strftime's %Y drops the zeros here).
    text = f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
    return f"{text}.{ms % 1000:03d}Z" if ms % 1000 else f"{text}Z"

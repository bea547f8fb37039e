"""Quantities, durations and timestamps are parsed once, to integers."""

from __future__ import annotations

import pytest
from preemptd.framework.quantity import (
    QuantityError,
    format_duration,
    format_quantity,
    format_timestamp,
    parse_duration,
    parse_quantity,
    parse_timestamp,
)


@pytest.mark.parametrize(
    ("text", "resource", "expected"),
    [
        ("500m", "cpu", 500),
        ("2", "cpu", 2000),
        ("1.5", "cpu", 1500),
        (2, "cpu", 2000),
        ("0.1", "cpu", 100),
        ("1Gi", "memory", 1 << 30),
        ("512Mi", "memory", 512 << 20),
        ("1G", "memory", 10**9),
        ("1k", "memory", 1000),
        ("1e3", "memory", 1000),
        ("8", "nvidia.com/gpu", 8),
        ("1.5", "nvidia.com/gpu", 2),
        ("100m", "memory", 1),
    ],
)
def test_quantities_become_integers_in_the_resources_unit(text: object, resource: str, expected: int) -> None:
    """cpu counts milli-units; everything else whole units, rounded up like Kubernetes' Value()."""
    assert expected == parse_quantity(text, resource)


@pytest.mark.parametrize("text", ["-1", "abc", "1.2.3", "1Gb", "", "1 Gi", True, None, [1]])
def test_malformed_or_negative_quantities_are_errors(text: object) -> None:
    """A quantity that is not Kubernetes notation, or is negative, is rejected, never read as 0."""
    with pytest.raises(QuantityError):
        parse_quantity(text, "memory")


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("90s", 90_000),
        ("5m", 300_000),
        ("1h30m", 5_400_000),
        ("2d4h", 2 * 86_400_000 + 4 * 3_600_000),
        ("1w", 604_800_000),
        ("1.5s", 1500),
        ("250ms", 250),
        ("0s", 0),
    ],
)
def test_durations_use_go_notation_with_days_and_weeks(text: str, expected_ms: int) -> None:
    """Go durations (plus d and w) become milliseconds."""
    assert expected_ms == parse_duration(text)


@pytest.mark.parametrize("text", ["600", 600, "0", "-5m", "5 m", "5mins", "abc", "", "1h-5m", None])
def test_bare_numbers_and_malformed_durations_are_errors(text: object) -> None:
    """A bare number, a negative or a malformed duration is an error, never silently zero."""
    with pytest.raises(QuantityError):
        parse_duration(text)


def test_timestamps_are_milliseconds_since_the_epoch_in_utc() -> None:
    """RFC 3339 with Z or an offset, and naive datetimes taken as UTC, all give epoch milliseconds."""
    assert 1_767_225_600_000 == parse_timestamp("2026-01-01T00:00:00Z")
    assert 1_767_225_600_000 == parse_timestamp("2026-01-01T01:00:00+01:00")
    assert 1_767_225_600_500 == parse_timestamp("2026-01-01T00:00:00.5Z")
    with pytest.raises(QuantityError):
        parse_timestamp("yesterday")


def test_formatting_round_trips_what_parsing_reads() -> None:
    """Messages show amounts and times the way a user wrote them."""
    assert "2" == format_quantity(2000, "cpu")
    assert "1500m" == format_quantity(1500, "cpu")
    assert "1Gi" == format_quantity(1 << 30, "memory")
    assert "1h30m" == format_duration(5_400_000)
    assert "0s" == format_duration(0)
    assert "2026-01-01T00:00:00Z" == format_timestamp(parse_timestamp("2026-01-01T00:00:00Z"))

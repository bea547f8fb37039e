"""Quantities and timestamps are parsed once per distinct text, errors every time."""

from __future__ import annotations

import pytest
from preemptd.framework import quantity
from preemptd.framework.quantity import QuantityError, parse_quantity, parse_timestamp


def test_a_repeated_quantity_text_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = quantity._parse_quantity

    def counting(value: object, resource: str) -> int:
        calls.append(value)
        return real(value, resource)

    monkeypatch.setattr(quantity, "_parse_quantity", counting)
    monkeypatch.setattr(quantity, "_QUANTITIES", {})
    assert [parse_quantity("16Gi", "memory") for _ in range(1000)] == [16 * 2**30] * 1000
    assert calls == ["16Gi"]


def test_the_memo_keeps_cpu_in_milli_units_apart_from_other_resources(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quantity, "_QUANTITIES", {})
    assert parse_quantity("2", "cpu") == 2000
    assert parse_quantity("2", "memory") == 2
    assert parse_quantity("2", "cpu") == 2000


def test_a_bad_quantity_is_reported_every_time_with_its_message() -> None:
    for _ in range(3):
        with pytest.raises(QuantityError, match="malformed quantity 'lots'"):
            parse_quantity("lots", "cpu")


def test_a_repeated_timestamp_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = quantity._parse_timestamp

    def counting(value: object) -> int:
        calls.append(value)
        return real(value)

    monkeypatch.setattr(quantity, "_parse_timestamp", counting)
    monkeypatch.setattr(quantity, "_TIMESTAMPS", {})
    # 2026-01-01T00:00:00Z is 20,454 days after the epoch.
    assert {parse_timestamp("2026-01-01T00:00:00Z") for _ in range(100)} == {20_454 * 86_400_000}
    assert calls == ["2026-01-01T00:00:00Z"]
    with pytest.raises(QuantityError, match="malformed timestamp"):
        parse_timestamp("yesterday")


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quantity, "_MEMO_BOUND", 4)
    monkeypatch.setattr(quantity, "_QUANTITIES", {})
    for amount in range(10):
        assert parse_quantity(f"{amount}Ki", "memory") == amount * 1024
    assert len(quantity._QUANTITIES) <= 4

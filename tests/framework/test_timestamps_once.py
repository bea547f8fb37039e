"""Timestamps parsed without the memo (``quantity.parse_timestamp_once``, which the
typed reader of Workloads uses: a Workload's creation and admission times are each its
own) read as the memo's parse does: milliseconds since the epoch in UTC, a time without
an offset taken as UTC, the same errors; and a Workload's times are not kept."""

from __future__ import annotations

import calendar
import datetime as dt
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from preemptd.daemon.backends.files import parse_text
from preemptd.framework import quantity
from preemptd.framework.objects import parse_objects
from preemptd.framework.quantity import QuantityError, parse_timestamp, parse_timestamp_once


def milliseconds(moment: dt.datetime) -> int:
    """Worked out apart from the parser: whole seconds by ``calendar.timegm`` of the time
    in UTC, and the milliseconds of its fraction (rounded down: a time before the epoch
    has a non-negative fraction too)."""
    utc = moment if moment.tzinfo is None else moment.astimezone(dt.UTC).replace(tzinfo=None)
    return calendar.timegm(utc.timetuple()) * 1000 + utc.microsecond // 1000


offsets = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(
    lambda minutes: dt.timezone(dt.timedelta(minutes=minutes))
)
moments = st.datetimes(
    min_value=dt.datetime(1000, 1, 1), max_value=dt.datetime(9000, 1, 1), timezones=st.one_of(st.none(), offsets)
)


@given(moments, st.sampled_from(["", " ", "\t"]), st.booleans())
def test_a_timestamp_parsed_once_is_what_the_memos_parse_gives(moment: dt.datetime, pad: str, zulu: bool) -> None:
    text = moment.isoformat()
    if zulu and moment.utcoffset() == dt.timedelta(0):
        text = text.removesuffix("+00:00") + "Z"
    text = pad + text + pad
    assert parse_timestamp_once(text) == milliseconds(moment) == parse_timestamp(text)
    assert parse_timestamp_once(moment) == milliseconds(moment)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("yesterday", "malformed timestamp 'yesterday' (expected RFC 3339)"),
        ("2026-13-01T00:00:00Z", "malformed timestamp '2026-13-01T00:00:00Z' (expected RFC 3339)"),
        (5, "expected an RFC 3339 timestamp, got 5"),
    ],
)
def test_a_bad_timestamp_parsed_once_is_the_same_error(value: object, message: str) -> None:
    for parse in (parse_timestamp_once, parse_timestamp):
        with pytest.raises(QuantityError) as error:
            parse(value)
        assert str(error.value) == message


def test_a_workloads_times_are_read_without_being_kept() -> None:
    created, admitted = "2021-03-04T05:06:07.891Z", "2021-03-04T06:00:00.5+01:00"
    workload = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "creationTimestamp": created},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1"}}]},
        "status": {
            "admission": {"podSets": [{"name": "main", "flavors": {"cpu": "f"}}]},
            "admittedAt": admitted,
        },
    }
    items = [
        {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}},
        {"apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"}},
        workload,
    ]
    documents = parse_text(json.dumps(items).encode(), json_only=True, typed=True)
    read = parse_objects([("f.json", document) for document in documents]).workloads["ns/w"]
    assert read.created == milliseconds(dt.datetime(2021, 3, 4, 5, 6, 7, 891000, tzinfo=dt.UTC))
    assert read.admitted_at == milliseconds(dt.datetime(2021, 3, 4, 5, 0, 0, 500000, tzinfo=dt.UTC))
    assert created not in quantity._TIMESTAMPS and admitted not in quantity._TIMESTAMPS

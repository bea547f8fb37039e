"""The intake tells the owner of a JSON list's text how far it has read (``RawItems.read_past``),
and never reads the text before an offset it has told.

Each offset told is checked by overwriting the text before it with zero bytes at once (what
a mapping's pages given back read as): the inventory must still be the one read from the
untouched text, with the same located problems, and the last offset told must be the
items' whole length, every item having been read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework import objects
from preemptd.framework.objects import Inventory, parse_objects
from preemptd.framework.objects.typed import RawItems, decode_items

from benchmarks.generate import generate

GENERATED = generate("S", 1)
PODS = [item for item in GENERATED if item["kind"] == "Pod"][:40]
OTHERS = [item for item in GENERATED if item["kind"] != "Pod"][:40]
BAD: list[Any] = [
    5,
    None,
    "text",
    {"kind": "Pod", "metadata": {"name": ""}},
    {"kind": "Gadget", "metadata": {"name": "g"}},
    PODS[0] | {"spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "x"}}}]}},
    OTHERS[-1] | {"spec": {"queueName": 7}},
]

item_lists = st.lists(st.sampled_from(PODS + OTHERS + BAD), min_size=1, max_size=60)


def read(text: bytes, every: int, *, released: bool) -> tuple[Inventory, list[str], list[int]]:
    """The inventory, its unknown fields and the offsets told, the text read with
    ``RawItems.read_past`` every ``every`` items; with ``released`` the text before each
    offset told is zeroed at once."""
    buffer = bytearray(text)
    told: list[int] = []

    def read_past(offset: int) -> None:
        told.append(offset)
        if released:
            buffer[:offset] = bytes(offset)

    document = decode_items(buffer)
    assert isinstance(document, RawItems)
    saved, objects._READ_PAST_EVERY = objects._READ_PAST_EVERY, every  # type: ignore[attr-defined]
    try:
        inventory = parse_objects([("f.json", RawItems(document.at, document.items, read_past))])
    finally:
        objects._READ_PAST_EVERY = saved  # type: ignore[attr-defined]
    return inventory, [str(problem) for problem in inventory.unknown_fields], told


def plain(text: bytes) -> tuple[Inventory, list[str]]:
    inventory = parse_objects([("f.json", decode_items(text))])
    return inventory, [str(problem) for problem in inventory.unknown_fields]


@settings(max_examples=60, deadline=None)
@given(item_lists, st.integers(1, 5), st.booleans())
def test_the_text_before_an_offset_told_is_never_read_again(items: list[Any], every: int, listed: bool) -> None:
    document: Any = {"kind": "List", "items": items} if listed else items
    text = json.dumps(document, separators=(",", ":")).encode()
    inventory, unknown, told = read(text, every, released=True)
    assert (inventory, unknown) == plain(text)
    assert told == sorted(told)
    assert len(told) == (len(items) + every - 1) // every + 1  # every `every` items, and at the end
    spanned = sum(len(json.dumps(item, separators=(",", ":"))) for item in items)
    assert told[-1] == spanned  # the items' own text: separators and brackets are not counted


def test_the_offsets_told_are_the_lengths_of_the_items_read_so_far() -> None:
    items = [PODS[0], 5, OTHERS[0], None, PODS[1]]
    lengths = [len(json.dumps(item, separators=(",", ":"))) for item in items]
    text = json.dumps(items, separators=(",", ":")).encode()
    assert read(text, 2, released=False)[2] == [0, sum(lengths[:2]), sum(lengths[:4]), sum(lengths)]


def test_a_generated_cluster_reads_the_same_with_its_text_zeroed_as_it_is_read() -> None:
    text = json.dumps(GENERATED, separators=(",", ":")).encode()
    inventory, unknown, told = read(text, 2_048, released=True)
    assert (inventory, unknown) == plain(text)
    assert len(inventory.pods) == 4_630
    assert told == [0, told[1], told[2], len(text) - len(GENERATED) - 1]


@pytest.mark.parametrize("document", [[], {"kind": "List", "items": []}])
def test_an_empty_list_tells_nothing_but_its_end(document: Any) -> None:
    assert read(json.dumps(document).encode(), 3, released=True)[2] == [0]

"""The decisions' JSON written in pieces: the pieces joined are the standard encoder's
indented text, byte for byte, and a long list is cut into pieces of a batch of items."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.daemon import cli

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()), max_size=6)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)
# A mapping of sections, as Decisions.to_dict is: mostly lists of entries, some scalars.
_SECTIONS = st.dictionaries(
    st.text(max_size=6),
    st.lists(_VALUES, max_size=9) | _VALUES,
    max_size=5,
)


def _standard(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


@settings(max_examples=400, deadline=None)
@given(_SECTIONS, st.integers(min_value=1, max_value=4))
def test_pieces_joined_are_the_standard_encoders_indented_text(data: dict[str, Any], batch: int) -> None:
    assert "".join(cli.indented_json_pieces(data, batch)) == _standard(data)


@settings(max_examples=100, deadline=None)
@given(_VALUES)
def test_anything_but_a_mapping_of_string_keys_is_one_piece(data: Any) -> None:
    pieces = cli.indented_json_pieces(data)
    if not (isinstance(data, dict) and data):
        assert pieces == [_standard(data)]
    assert "".join(pieces) == _standard(data)


def test_keys_that_are_not_strings_are_written_as_the_standard_encoder_writes_them() -> None:
    data = {1: [1, 2], None: [3], 2.5: {"a": []}}
    assert cli.indented_json_pieces(data, 1) == [_standard(data)]


def test_a_long_list_is_cut_into_pieces_of_a_batch_of_items_each() -> None:
    entries = [{"workload": f"ns/w{number}", "pods": [f"p{number}"], "count": None} for number in range(10)]
    data = {"now": "2026-01-01T00:00:00Z", "admitted": entries, "pending": [], "shares": {"q": 1}}
    pieces = cli.indented_json_pieces(data, 3)
    holding = [piece for piece in pieces if '"workload"' in piece]
    assert [piece.count('"workload"') for piece in holding] == [3, 3, 3, 1]
    assert "".join(pieces) == _standard(data)


def test_values_that_are_not_json_in_one_batch_are_written_by_the_standard_encoder() -> None:
    data = {"a": [1, 2, math.nan, 4, -math.inf], "b": ["\ud800", "x"], "c": [], "d": {}}
    assert "".join(cli.indented_json_pieces(data, 2)) == _standard(data)

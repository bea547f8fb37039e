"""A program that reads no more objects lets go of the readers' memos
(``objects.typed.forget_read_memos``, which ``preemptd cycle`` calls once its snapshot
is built): the memos are empty, and objects read afterwards read as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from preemptd.daemon.backends.files import load_files
from preemptd.framework import quantity
from preemptd.framework.objects import parse_objects, typed, typed_admissions, typed_workloads
from preemptd.framework.objects.typed import forget_read_memos

from benchmarks import generate


def test_forgotten_memos_are_empty_and_reading_again_gives_the_same_records(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    generate.write(generate.generate_shape("grow-deep-1000", 5), str(path))
    first = parse_objects(load_files([path], typed=True))
    assert quantity._TIMESTAMPS and typed._SHARED  # reading kept some
    assert typed_workloads._POD_SETS_BY_TEXT and typed_admissions._BY_TEXT  # memos holding shared maps
    forget_read_memos()
    assert not quantity._TIMESTAMPS and not quantity._QUANTITIES and not typed._SHARED
    assert not any(typed._SHARING)
    again = parse_objects(load_files([path], typed=True))
    assert again.pods == first.pods and again.workloads == first.workloads and again.nodes == first.nodes
    assert quantity.parse_timestamp("2025-12-28T16:21:47.854Z") == 1766938907854


def test_memos_holding_shared_maps_are_emptied_when_the_shared_maps_reach_their_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A memo whose records hold shared maps (``typed.sharing``) goes with them: what it
    gave before would hold maps no longer shared, and an equal map read after would be
    another record."""
    memo = typed.sharing({"kept": typed._shared([("memo-bound-test", 1)])})
    try:
        monkeypatch.setattr(typed, "_SHARED_BOUND", len(typed._SHARED) + 2)
        typed._shared([("memo-bound-test", 2)])
        typed._shared([("memo-bound-test", 3)])
        assert memo  # the bound not reached yet
        typed._shared([("memo-bound-test", 4)])
        assert not memo and list(typed._SHARED) == [(("memo-bound-test", 4),)]
    finally:
        typed._SHARING.remove(memo)

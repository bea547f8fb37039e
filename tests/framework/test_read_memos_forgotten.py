"""A program that reads no more objects lets go of the readers' memos
(``objects.typed.forget_read_memos``, which ``preemptd cycle`` calls once its snapshot
is built): the memos are empty, and objects read afterwards read as before."""

from __future__ import annotations

from pathlib import Path

from preemptd.daemon.backends.files import load_files
from preemptd.framework import quantity
from preemptd.framework.objects import parse_objects, typed
from preemptd.framework.objects.typed import forget_read_memos

from benchmarks import generate


def test_forgotten_memos_are_empty_and_reading_again_gives_the_same_records(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    generate.write(generate.generate_shape("grow-deep-1000", 5), str(path))
    first = parse_objects(load_files([path], typed=True))
    assert quantity._TIMESTAMPS and typed._SHARED  # reading kept some
    forget_read_memos()
    assert not quantity._TIMESTAMPS and not quantity._QUANTITIES and not typed._SHARED
    again = parse_objects(load_files([path], typed=True))
    assert again.pods == first.pods and again.workloads == first.workloads and again.nodes == first.nodes
    assert quantity.parse_timestamp("2025-12-28T16:21:47.854Z") == 1766938907854

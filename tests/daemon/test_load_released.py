"""A regular JSON file read for the model is held in an anonymous mapping whose pages are
given back as the intake reads past them: the file reads into the same objects, with the
same located problems, as its bytes do, and once read its pages read as zeros (the
memory left the process). Anything else (a pipe, standard input, YAML, a file that
changed size while read) is read as before."""

from __future__ import annotations

import io
import json
import mmap
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.backends import files
from preemptd.daemon.backends.files import load_files, parse_text
from preemptd.framework.objects import Inventory, parse_objects
from preemptd.framework.objects.typed import RawItems

from benchmarks.generate import generate

GENERATED = generate("S", 1)
BAD: list[Any] = [
    5,
    None,
    {"kind": "Pod", "metadata": {"name": ""}},
    GENERATED[10] | {"spec": {"containers": [{"resources": {"requests": {"cpu": "x"}}}]}},
]


def cluster_text(*, indent: int | None) -> bytes:
    """The generated cluster with bad items among its first, middle and last ones."""
    items = BAD[:2] + GENERATED[:2_500] + BAD[2:] + GENERATED[2_500:] + BAD
    return json.dumps(items, indent=indent, separators=None if indent else (",", ":")).encode()


def inventory(documents: list[tuple[str, Any]]) -> tuple[Inventory, list[str]]:
    found = parse_objects(documents)
    return found, [str(problem) for problem in found.unknown_fields]


def from_bytes(path: Path) -> tuple[Inventory, list[str]]:
    """The file read from its bytes, nothing given back."""
    return inventory([(str(path), document) for document in parse_text(path.read_bytes(), json_only=True, typed=True)])


@pytest.mark.parametrize("indent", [None, 1])
def test_a_large_file_reads_the_same_and_gives_its_pages_back_as_it_is_read(tmp_path: Path, indent: int | None) -> None:
    path = tmp_path / "cluster.json"
    path.write_bytes(cluster_text(indent=indent))
    loaded = load_files([path], typed=True)
    [(_, document)] = loaded
    assert isinstance(document, RawItems) and isinstance(document.read_past, files._ReadPast)
    read_past = document.read_past
    read = inventory(loaded)
    assert read == from_bytes(path)
    assert len(read[0].problems) == 2 * len(BAD) + 1  # each bad item, and the key read twice
    size, count = path.stat().st_size, len(GENERATED) + 2 * len(BAD)
    # The items' own text: the file less its brackets and what separates the items
    # ("," compact; ",\n " indented, with "\n " after "[" and "\n" before "]").
    spanned = size - count - 1 if indent is None else size - 3 * count - 2
    assert read_past.released == spanned // mmap.PAGESIZE * mmap.PAGESIZE
    assert read_past.buffer[: read_past.released] == bytes(read_past.released)  # given back
    assert read_past.buffer[read_past.released :] == path.read_bytes()[read_past.released :]


def test_the_pages_given_back_are_those_before_the_offset_told() -> None:
    buffer = mmap.mmap(-1, 5 * mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buffer[:] = b"x" * len(buffer)
    read_past = files._ReadPast(buffer)
    read_past(mmap.PAGESIZE - 1)  # no whole page yet
    assert read_past.released == 0 and buffer[:] == b"x" * len(buffer)
    read_past(2 * mmap.PAGESIZE + 10)
    assert buffer[: 2 * mmap.PAGESIZE] == bytes(2 * mmap.PAGESIZE)
    assert buffer[2 * mmap.PAGESIZE :] == b"x" * (3 * mmap.PAGESIZE)
    read_past(mmap.PAGESIZE)  # behind: nothing
    read_past(100 * mmap.PAGESIZE)  # beyond the end: up to the end
    assert read_past.released == len(buffer) and buffer[:] == bytes(len(buffer))


def small_cluster() -> bytes:
    return json.dumps(GENERATED[:300] + BAD).encode()


def test_a_pipe_is_read_as_bytes(tmp_path: Path) -> None:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    text = small_cluster()

    def write() -> None:
        with open(path, "wb") as pipe:
            pipe.write(text)

    writer = threading.Thread(target=write)
    writer.start()
    loaded = load_files([path], typed=True)
    writer.join()
    [(_, document)] = loaded
    assert isinstance(document, RawItems) and document.read_past is None
    regular = tmp_path / "regular.json"
    regular.write_bytes(text)
    assert inventory([(str(regular), document) for _, document in loaded]) == inventory(load_files([regular], typed=True))


def test_standard_input_and_yaml_are_read_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = small_cluster()
    regular = tmp_path / "regular.json"
    regular.write_bytes(text)
    expected = inventory([("f", document) for _, document in load_files([regular], typed=True)])
    monkeypatch.setattr("sys.stdin", io.StringIO(text.decode()))
    assert inventory([("f", document) for _, document in load_files(["-"], typed=True)]) == expected
    yaml = tmp_path / "cluster.yaml"
    yaml.write_bytes(text)  # JSON is YAML
    assert inventory([("f", document) for _, document in load_files([yaml], typed=True)]) == expected


def test_a_file_that_grows_while_read_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cluster.json"
    text = small_cluster()
    path.write_bytes(text)
    real_fstat = os.fstat

    def shorter(fd: int) -> Any:
        status = real_fstat(fd)
        return os.stat_result((*status[:6], status.st_size - 100, *status[7:10]))

    monkeypatch.setattr(files.os, "fstat", shorter)
    assert files._mapped_bytes(str(path)) == text
    loaded = load_files([path], typed=True)
    monkeypatch.undo()
    assert inventory([(str(path), document) for _, document in loaded]) == from_bytes(path)

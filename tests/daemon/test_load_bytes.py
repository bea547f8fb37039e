"""Reading a JSON snapshot for the model takes an ASCII file as its bytes (no string copy
of a large file); every file reads into the same objects, and fails with the same
located message, as when its text is decoded first (as ``--apply``, which keeps the
text, reads it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from preemptd.daemon.backends.files import LoadError, load_files
from preemptd.framework.objects import parse_objects

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}},
    "spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "1"}}}]},
}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}}

FILES: dict[str, bytes] = {
    "a list": json.dumps([POD, NODE]).encode(),
    "a kind: List": json.dumps({"kind": "List", "items": [POD, NODE]}).encode(),
    "one object": json.dumps(NODE).encode(),
    "not ASCII": json.dumps([POD | {"metadata": {"name": "é", "namespace": "ns"}}], ensure_ascii=False).encode(),
    "a byte order mark": b"\xef\xbb\xbf" + json.dumps([POD]).encode(),
    "bad JSON": b'[{"kind": "Pod",\n  "metadata": }]',
    "YAML in a .json file": b"kind: Node\nmetadata: {name: n1}\n",
    "not UTF-8": b'[{"kind": "Pod", "metadata": {"name": "\xff"}}]',
    "a bad item": json.dumps([POD, 5, None, {"kind": "Pod", "metadata": {"name": ""}}]).encode(),
    "empty": b"",
}


def read(path: Path, *, keep_text: bool) -> tuple[list[str], list[str], object]:
    try:
        documents = load_files([path], typed=True, keep_text=keep_text)
    except LoadError as exc:
        return exc.messages, [], None
    inventory = parse_objects(documents)
    return [], [str(problem) for problem in inventory.problems], (inventory.pods, inventory.nodes)


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_json_file_reads_the_same_as_bytes_and_as_text(name: str, tmp_path: Path) -> None:
    path = tmp_path / "snapshot.json"
    path.write_bytes(FILES[name])
    assert read(path, keep_text=False) == read(path, keep_text=True)

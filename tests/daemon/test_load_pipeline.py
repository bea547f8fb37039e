"""Loading a snapshot: the collector paused and then frozen, no documents kept.

``preemptd cycle`` loads and builds the snapshot with the cyclic collector paused, then
freezes what it built; the parsed documents are dropped once read, and ``--apply``
reads the kept texts again, so what it writes is unchanged.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

from preemptd.daemon.backends import files
from preemptd.daemon.backends.files import load_files, parse_text
from preemptd.daemon.cli import main

NOW = "2026-01-01T00:00:00Z"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"


def test_the_collector_is_paused_while_loading_and_frozen_after() -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        files.hold_collection()
        assert not gc.isenabled()
        kept = [[index] for index in range(1000)]
        files.settle_collection()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(kept)
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_cycle_leaves_the_collector_running(tmp_path: Path, capsys: object) -> None:
    try:
        assert main(["cycle", "--now", NOW, "--output", "json", str(EXAMPLE)]) == 0
        assert gc.isenabled()
        missing = tmp_path / "missing.yaml"
        assert main(["cycle", "--now", NOW, str(missing)]) != 0
        assert gc.isenabled()  # a failed load resumes it too
    finally:
        gc.unfreeze()


def test_forgotten_documents_are_read_again_from_the_kept_text(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    objects = [{"kind": "Pod", "metadata": {"name": "p"}}, {"kind": "Node", "metadata": {"name": "n"}}]
    path.write_text(json.dumps(objects))
    loaded = load_files([path], keep_text=True)
    assert loaded.forget() == []
    assert loaded.again() == [objects]
    assert loaded.again() == parse_text(path.read_text(), json_only=True)


def test_documents_are_not_kept_unless_asked() -> None:
    loaded = load_files([EXAMPLE])
    assert len(loaded) > 0 and loaded.texts == []

"""The `preemptd` process: what a cycle imports, how it ends, how it writes its JSON.

It ends a read command without freeing its model object by object (``cli.entry``):
everything it prints still comes out whole, the exit code is the command's, ``atexit``
functions still run, and a thread still running is waited for. A cycle over JSON that
prints JSON imports neither PyYAML nor rich. The decisions' JSON is written byte for
byte as ``Decisions.to_json`` writes it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.daemon import cli
from preemptd.daemon.output import Answer
from test_cli import NOW, broken_snapshot, preemption_snapshot, write_snapshot

from benchmarks import generate

ROOT = Path(__file__).resolve().parent.parent.parent

# Runs ``cli.entry`` as ``python -m preemptd`` does, saying on stderr whether it ended
# through os._exit; ``SETUP`` lines run first.
_PROGRAM = """
import os, sys
real_exit = os._exit
def quick_exit(code):
    sys.stderr.write(f"quick exit {{code}}\\n")
    sys.stderr.flush()
    real_exit(code)
os._exit = quick_exit
{setup}
from preemptd.daemon.cli import entry
sys.argv = ["preemptd", *sys.argv[1:]]
entry()
"""


def program(*args: str, setup: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PROGRAM.format(setup=setup), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A generated cluster whose decisions are larger than any output buffer or pipe."""
    path = tmp_path_factory.mktemp("cluster") / "cluster.json"
    generate.write(generate.generate_shape("grow-deep-1000", 5), str(path))
    return str(path)


def test_a_cycle_prints_all_its_decisions_and_exits_0_without_tearing_down(
    cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["cycle", cluster, "--now", NOW, "-o", "json"]) == 0
    expected = capsys.readouterr().out
    done = program("cycle", cluster, "--now", NOW, "-o", "json")
    assert len(expected) > 65_536  # more than a pipe holds
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "quick exit 0\n")


def test_the_exit_code_and_the_errors_are_the_commands(tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    done = program("explain", "ml/nobody", snapshot, "--now", NOW)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "preemptd: workload ml/nobody not found in the snapshot\nquick exit 2\n"
    broken = write_snapshot(tmp_path / "b.yaml", broken_snapshot())
    strict = program("cycle", broken, "--now", NOW, "--strict")
    assert (strict.returncode, strict.stdout) == (2, "")
    assert "quick exit" not in strict.stderr  # it ended before holding any model
    assert strict.stderr.startswith(f"{broken}: ")


def test_atexit_functions_run_and_what_they_print_comes_out(tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    setup = "import atexit; atexit.register(lambda: print('atexit ran'))"
    done = program("validate", snapshot, setup=setup)
    assert done.returncode == 0
    assert done.stdout.endswith("atexit ran\n") and done.stdout.startswith("valid: ")
    assert done.stderr == "quick exit 0\n"


def test_a_thread_still_running_is_waited_for(tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    # The thread ends only once the main thread has finished: it is still running
    # whatever the machine's speed, and what it prints comes last.
    setup = (
        "import threading\n"
        "threading.Thread(target=lambda: (threading.main_thread().join(), print('thread done'))).start()"
    )
    done = program("cycle", snapshot, "--now", NOW, "-o", "name", setup=setup)
    assert done.returncode == 0
    assert done.stdout == "admitted/ml/small\npreempted/ml/low\npending/ml/high\nthread done\n"
    assert "quick exit" not in done.stderr


def test_main_called_in_process_keeps_nothing_to_the_exit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    assert cli.main(["cycle", snapshot, "--now", NOW]) == 0
    assert cli._kept_to_exit is None


def test_a_json_cycle_printing_json_imports_neither_yaml_nor_rich(cluster: str) -> None:
    script = (
        "import sys\n"
        "from preemptd.daemon.cli import main\n"
        f"code = main(['cycle', {cluster!r}, '--now', {NOW!r}, '-o', 'json'])\n"
        "print(code, sorted({m.split('.')[0] for m in sys.modules} & {'yaml', 'rich'}), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.stderr == "0 []\n"
    table = program("cycle", cluster, "--now", NOW)  # a table: rich, when it is wanted
    assert table.returncode == 0 and "Admitted" in table.stdout


# --- the decisions' JSON ------------------------------------------------------------


def test_the_cycles_json_is_what_decisions_to_json_writes(
    cluster: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers: list[Answer] = []
    monkeypatch.setattr(cli, "write_output", lambda answer, output: answers.append(answer))
    for snapshot in (cluster, str(ROOT / "examples" / "quickstart.yaml")):
        assert cli.main(["cycle", snapshot, "--now", NOW, "-o", "json"]) == 0
    for answer in answers:
        decisions = answer.data.__self__  # type: ignore[attr-defined]  # Decisions.to_dict
        assert answer.text is not None and "".join(answer.text()) == decisions.to_json()


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()))
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(_JSON)
def test_indented_json_is_the_standard_encoders_text_byte_for_byte(data: Any) -> None:
    expected = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    assert cli.indented_json(data) == expected


def test_values_that_are_not_json_are_written_as_the_standard_encoder_writes_them() -> None:
    data = {"a": [math.nan, -math.inf, 1e16], "b": "\ud800", "c": [], "d": {}}
    assert cli.indented_json(data) == json.dumps(data, indent=2, ensure_ascii=False) + "\n"

"""``benchmarks/bench_cycle.py`` reports the measured process's own peak RSS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A process that holds 300 MB, then measures a child that touches 20 MB.
_PARENT = """
import json, sys
from benchmarks.bench_cycle import run_process
held = bytearray(300 * 1024 * 1024)
held[::4096] = b"x" * len(held[::4096])
child = "x = bytearray(20 * 1024 * 1024); x[::4096] = b'x' * len(x[::4096])"
print(json.dumps(run_process([sys.executable, "-c", child])))
"""


def test_peak_rss_is_the_childs_own_not_the_benchmarks() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PARENT], cwd=ROOT, capture_output=True, text=True, check=True
    )
    run = json.loads(done.stdout)
    assert run["code"] == 0
    # The child's own mark: its 20 MB plus an interpreter, far below the parent's 300 MB.
    assert 20e6 < run["rss_bytes"] < 150e6
    assert run["wall_s"] > 0

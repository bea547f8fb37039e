"""The commands that read files never load the Kubernetes client: it alone is a sixth of
the memory of a `cycle` over the large shape (about 60 MB of ~300), and a file command has
no use for it. (`validate` does load it: it checks the `[integrations]` tables too.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOW = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    "argv",
    [
        ["cycle", "examples/quickstart.yaml", "--now", NOW, "-o", "json"],
        ["pending", "examples/quickstart.yaml", "--now", NOW],
        ["plugins"],
    ],
)
def test_a_file_command_does_not_load_the_kubernetes_client(argv: list[str]) -> None:
    script = (
        "import sys\n"
        "from preemptd.daemon.cli import main\n"
        f"code = main({argv!r})\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes_asyncio')\n"
        "print('LOADED', len(loaded), loaded[:3], file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "LOADED 0 []" in result.stderr

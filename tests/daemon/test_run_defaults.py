"""`preemptd run` with the shipped defaults: the built-in configuration and config/preemptd.toml
start the daemon on the kubernetes backend; a configuration that names another is refused
(issue 20, point 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from preemptd.daemon.service import check_configuration

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", [None, REPO / "config" / "preemptd.toml"], ids=["built-in", "shipped-file"])
def test_run_uses_the_kubernetes_backend_with_the_shipped_defaults(path: Path | None) -> None:
    config, _, problems = check_configuration(path)
    assert [] == problems
    assert "kubernetes" == config.backend.kind


def test_a_backend_written_in_the_file_is_what_run_checks(tmp_path: Path) -> None:
    written = tmp_path / "preemptd.toml"
    written.write_text('[backend]\nkind = "files"\n')
    _, _, problems = check_configuration(written)
    assert [f'{written}:2: backend.kind: `preemptd run` needs kind = "kubernetes"; this configuration has \'files\''] == [
        str(p) for p in problems
    ]

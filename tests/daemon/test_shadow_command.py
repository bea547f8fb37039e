"""`preemptd run --shadow kueue` on the command line: its checks, and a cluster without Kueue."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from kube.apiserver import ApiServer
from preemptd.daemon.cli import main
from running import kubeconfig, write_config


def test_a_negative_shadow_grace_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path / "preemptd.toml", '[backend]\nkind = "kubernetes"\n')
    assert 2 == main(["run", "--config", str(config), "--shadow", "kueue", "--shadow-grace", "-1"])
    assert "--shadow-grace: expected seconds (0 or more), got -1.0" in capsys.readouterr().err


def test_only_kueue_can_be_shadowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path / "preemptd.toml", '[backend]\nkind = "kubernetes"\n')
    assert 2 == main(["run", "--config", str(config), "--shadow", "volcano"])
    assert "invalid choice: 'volcano'" in capsys.readouterr().err


@pytest.mark.asyncio
async def test_shadowing_a_cluster_without_kueue_exits_1_saying_what_is_missing(tmp_path: Path) -> None:
    async with ApiServer(bookmark_interval=0.2) as server:
        config = write_config(tmp_path / "preemptd.toml", '[backend]\nkind = "kubernetes"\n')
        env = {**os.environ, "KUBECONFIG": str(kubeconfig(tmp_path / "kubeconfig", server))}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "preemptd.daemon.cli", "run", "--config", str(config), "--shadow", "kueue",
            "--http-address", "127.0.0.1:0", env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
        assert 1 == process.returncode
        assert ("preemptd: error: the cluster serves no ResourceFlavor of kueue.x-k8s.io (tried v1beta2, v1beta1): "
                "is Kueue installed?") in stderr.decode()
        assert [] == [r for r in server.requests if r.verb not in ("get", "list", "watch")]

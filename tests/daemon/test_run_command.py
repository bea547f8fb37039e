"""`preemptd run` before it connects: its configuration and command line are checked first."""

from __future__ import annotations

from pathlib import Path

import pytest
from preemptd.daemon.cli import main
from preemptd.daemon.config import read_config, split_address


def test_run_needs_the_kubernetes_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A configuration for another backend is a configuration error (exit 78) naming the key."""
    config = tmp_path / "preemptd.toml"
    config.write_text('[backend]\nkind = "simulation"\n')
    assert 78 == main(["run", "--config", str(config)])
    assert f"{config}:2: backend.kind: `preemptd run` needs kind = \"kubernetes\"" in capsys.readouterr().err


def test_a_bad_http_address_on_the_command_line_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--http-address must be host:port (exit 2), checked before anything starts."""
    config = tmp_path / "preemptd.toml"
    config.write_text('[backend]\nkind = "kubernetes"\n')
    assert 2 == main(["run", "--config", str(config), "--http-address", "localhost"])
    assert "--http-address: expected host:port" in capsys.readouterr().err


def test_daemon_timings_and_address_are_checked_with_file_and_line(tmp_path: Path) -> None:
    """cycle_deadline, stale_after and shutdown_timeout must be > 0; http_address must be host:port."""
    config = tmp_path / "preemptd.toml"
    config.write_text('[daemon]\nhttp_address = "8080"\ncycle_deadline = "0s"\nstale_after = "1m"\n')
    _, problems = read_config(config)
    expected = [
        f"{config}:2: daemon.http_address: expected host:port such as '127.0.0.1:8080', got '8080'",
        f"{config}:3: daemon.cycle_deadline: must be longer than 0s",
    ]
    assert expected == [str(p) for p in problems]


def test_owner_settle_is_shorter_than_the_cycle_deadline(tmp_path: Path) -> None:
    """A cycle cannot wait for the owner reconciler as long as it may run in all."""
    config = tmp_path / "preemptd.toml"
    config.write_text('[daemon]\ncycle_deadline = "2s"\nowner_settle = "2s"\n')
    _, problems = read_config(config)
    assert [f"{config}:3: daemon.owner_settle: must be shorter than cycle_deadline"] == [str(p) for p in problems]
    config.write_text('[daemon]\nowner_settle = "0s"\n')
    settings, problems = read_config(config)
    assert ([], 0) == (problems, settings.daemon.owner_settle)


def test_addresses_split_into_host_and_port() -> None:
    """IPv4, bracketed IPv6, and an empty host (every interface)."""
    assert [("127.0.0.1", 8080), ("::1", 9090), ("0.0.0.0", 80)] == [
        split_address("127.0.0.1:8080"), split_address("[::1]:9090"), split_address(":80")]


def test_the_shipped_deployment_runs_two_replicas_with_leader_election_and_probes(tmp_path: Path) -> None:
    """config/kubernetes: a valid configuration with leader election on, two replicas, probes on
    /healthz and /readyz at the metrics port, and the pod's name for the holder identity."""
    from kube.cluster import manifest_documents
    from preemptd.daemon.service import check_configuration

    documents = manifest_documents()
    configmap = next(d for d in documents if d["kind"] == "ConfigMap")
    path = tmp_path / "preemptd.toml"
    path.write_text(configmap["data"]["preemptd.toml"])
    config, _, problems = check_configuration(path)
    assert ([], True) == (problems, config.leader_election.enabled)
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert 2 == deployment["spec"]["replicas"]
    assert ("/healthz", "/readyz") == (container["livenessProbe"]["httpGet"]["path"],
                                       container["readinessProbe"]["httpGet"]["path"])
    assert [8080] == [port["containerPort"] for port in container["ports"]]
    assert config.daemon.http_address.endswith(":8080")
    assert "POD_NAME" in {env["name"] for env in container["env"]}
    role = next(d for d in documents if d["kind"] == "Role")
    assert (config.leader_election.lease_namespace, [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "verbs": ["create", "get", "update"]}]) == (role["metadata"]["namespace"], role["rules"])

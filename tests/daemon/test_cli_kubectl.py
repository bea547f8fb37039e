"""kubectl conventions (issue 20, point 6) and `preemptd dump` (point 13)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from preemptd.daemon.cli import _parser, main
from test_cli import NOW, preemption_snapshot, run, write_snapshot

REPO = Path(__file__).resolve().parents[2]


# --- -o json|yaml|wide|name ------------------------------------------------------------------


def read_commands(snapshot: str) -> dict[str, list[str]]:
    return {
        "cycle": ["cycle", snapshot, "--now", NOW],
        "explain": ["explain", "ml/high", snapshot, "--now", NOW],
        "validate": ["validate", snapshot],
        "plugins": ["plugins"],
    }


@pytest.mark.parametrize("command", ["cycle", "explain", "validate", "plugins"])
def test_every_read_command_prints_json_and_the_same_data_as_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    argv = read_commands(write_snapshot(tmp_path / "s.yaml", preemption_snapshot()))[command]
    code, as_json, _ = run(capsys, *argv, "-o", "json")
    code_yaml, as_yaml, _ = run(capsys, *argv, "-o", "yaml")
    assert (0, 0) == (code, code_yaml)
    assert json.loads(as_json) == yaml.safe_load(as_yaml)


def test_o_name_prints_one_type_and_name_per_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commands = read_commands(write_snapshot(tmp_path / "s.yaml", preemption_snapshot()))
    names = {command: run(capsys, *argv, "-o", "name")[1].splitlines() for command, argv in commands.items()}
    assert ["admitted/ml/small", "preempted/ml/low", "pending/ml/high"] == names["cycle"]
    assert ["Workload/ml/high"] == names["explain"]
    assert [
        "ResourceFlavor/default", "Queue/other", "Queue/team", "Workload/ml/high", "Workload/ml/low",
        "Workload/ml/small",
    ] == names["validate"]
    assert "plugin/priority" in names["plugins"]


def test_o_wide_never_folds_a_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 80 columns the table folds the pending message; `-o wide` keeps the row on one line."""
    monkeypatch.setenv("COLUMNS", "80")
    argv = read_commands(write_snapshot(tmp_path / "s.yaml", preemption_snapshot()))["cycle"]
    message = "preempting ml/low; admitted once they have released their quota"

    def row(output: str) -> str:
        out = run(capsys, *argv, "-o", output)[1]
        return " ".join(next(line for line in out.splitlines() if line.lstrip().startswith("ml/high")).split())

    assert f"ml/high PendingPreemption {message} ml/low" == row("wide")
    assert message not in row("table")


def test_plugins_wide_says_why_a_plugin_is_off(capsys: pytest.CaptureFixture[str]) -> None:
    """`-o wide` adds whether each plugin was asked for and whether it is installed."""
    out = run(capsys, "plugins", "-o", "wide")[1].splitlines()
    assert ["name", "source", "enabled", "requested", "installed"] == out[0].split()
    assert ["fair-sharing", "built-in", "no", "no", "yes"] in [line.split() for line in out]


def test_explain_takes_the_namespace_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    with_flag = run(capsys, "explain", "high", "-n", "ml", snapshot, "--now", NOW)
    with_key = run(capsys, "explain", "ml/high", snapshot, "--now", NOW)
    assert with_key == with_flag


def test_cluster_options_go_with_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    code, _, err = run(capsys, "explain", "ml/high", snapshot, "--context", "prod")
    assert (2, "preemptd: error: --kubeconfig and --context go with --cluster\n") == (code, err)


def test_a_missing_kubeconfig_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`--kubeconfig` is the file read: a missing one is the error, not ~/.kube/config."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    missing = tmp_path / "nowhere.yaml"
    code, _, err = run(capsys, "explain", "ml/x", "--cluster", "--kubeconfig", str(missing))
    assert (2, f"preemptd: error: --kubeconfig {missing}: no such file\n") == (code, err)


def test_every_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    """`preemptd --help` and every `preemptd COMMAND --help` end with examples."""
    commands = next(a for a in _parser()._actions if a.dest == "command").choices
    for argv in [[], *([name] for name in commands)]:
        code, out, _ = run(capsys, *argv, "--help")
        examples = out.partition("\nexamples:\n")[2].splitlines()
        assert (0, True) == (code, bool(examples) and all(line.startswith("  ") for line in examples)), argv


def bash_complete(script: str, *words: str) -> list[str]:
    """What the bash script offers for ``preemptd WORDS`` (the last word being typed)."""
    program = (
        f"{script}\nCOMP_WORDS=(preemptd {' '.join(repr(w) for w in words)}); "
        f"COMP_CWORD={len(words)}; _preemptd; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    return subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True).stdout.split()


def test_bash_completion_offers_commands_options_and_values(capsys: pytest.CaptureFixture[str]) -> None:
    code, script, _ = run(capsys, "completion", "bash")
    assert 0 == code
    assert ["cycle"] == bash_complete(script, "cy")
    assert {"dump", "completion", "explain", "simulate"} <= set(bash_complete(script, ""))
    assert ["table", "wide", "json", "yaml", "name"] == bash_complete(script, "validate", "-o", "")
    assert ["--config", "--context"] == bash_complete(script, "explain", "--con")
    assert ["bash", "zsh"] == bash_complete(script, "completion", "")


def test_zsh_completion_describes_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, script, _ = run(capsys, "completion", "zsh")
    parser = _parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert (0, "#compdef preemptd") == (code, script.splitlines()[0])
    for name in commands:
        assert f"        {name}) _arguments " in script


# --- dump --------------------------------------------------------------------------------------


def test_a_dump_is_read_by_cycle_explain_and_simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One file: `cycle` and `explain` read it at its moment under its configuration,
    `simulate` runs on from it."""
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    config = tmp_path / "c.toml"
    config.write_text('[scheduler]\nactions = ["allocate"]\n')
    dump = tmp_path / "dump.yaml"
    code, _, err = run(capsys, "dump", snapshot, "--config", str(config), "--now", NOW, "--out", str(dump))
    assert (0, f"wrote 6 objects to {dump}\n") == (code, err)
    written = yaml.safe_load(dump.read_text())
    assert (NOW, {"scheduler": {"actions": ["allocate"]}}) == (written["start"], written["config"])
    # No --now and no --config: the dump's moment and its configuration (allocate only,
    # so ml/high is not given ml/low's room by a preemption).
    decisions = json.loads(run(capsys, "cycle", str(dump), "-o", "json")[1])
    assert (NOW, [], ["ml/small"]) == (
        decisions["now"], decisions["preempted"], [a["workload"] for a in decisions["admitted"]]
    )
    explained = run(capsys, "explain", "ml/small", str(dump))
    assert (0, "ml/small: admitted to queue other") == (explained[0], explained[1].splitlines()[0])
    code, out, err = run(capsys, "simulate", str(dump))
    expected = f"Simulated {dump}: 1h from {NOW}, 3 workloads at the start, 0 arriving"
    assert (0, True) == (code, expected in " ".join(out.split())), err


def test_dump_as_test_is_a_scenario_case_that_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--as-test` writes a case in tests/scenarios' format whose `expect` holds for it."""
    import sys

    sys.path.insert(0, str(REPO / "tests/scenarios"))
    from test_scenarios import compare

    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    case_path = tmp_path / "case.yaml"
    assert 0 == run(capsys, "dump", snapshot, "--now", NOW, "--as-test", "--out", str(case_path))[0]
    case = yaml.safe_load(case_path.read_text())
    assert {"description", "now", "objects", "expect"} == set(case)
    assert ["ml/low"] == [entry["workload"] for entry in case["expect"]["preempted"]]
    decisions = json.loads(run(capsys, "cycle", str(case_path), "-o", "json")[1])
    assert [] == compare(case["expect"], decisions)


def test_dump_of_a_dump_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    dump = tmp_path / "d.yaml"
    run(capsys, "dump", snapshot, "--now", NOW, "--out", str(dump))
    code, _, err = run(capsys, "dump", str(dump), "--out", str(tmp_path / "e.yaml"))
    assert (2, f"preemptd: error: {dump} is a dump already\n") == (code, err)


def test_run_reads_the_cluster_of_kubeconfig(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --kubeconfig FILE` hands FILE to the daemon; a missing FILE is a usage error."""
    from preemptd.daemon import service

    config = tmp_path / "preemptd.toml"
    config.write_text('[backend]\nkind = "kubernetes"\n')
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    seen: list[str | None] = []

    contexts: list[str | None] = []

    async def daemon(
        *args: object, kubeconfig: str | None = None, context: str | None = None, **kwargs: object
    ) -> int:
        seen.append(kubeconfig)
        contexts.append(context)
        return 0

    monkeypatch.setattr(service, "run_daemon", daemon)
    monkeypatch.setattr("preemptd.daemon.logging.configure_logging", lambda **kwargs: None)
    assert 0 == main(["run", "--config", str(config), "--kubeconfig", str(kubeconfig)])
    assert [str(kubeconfig)] == seen
    assert 0 == main(["run", "--config", str(config), "--kubeconfig", str(kubeconfig), "--context", "staging"])
    assert [None, "staging"] == contexts
    missing = tmp_path / "nowhere"
    code, _, err = run(capsys, "run", "--config", str(config), "--kubeconfig", str(missing))
    assert (2, f"preemptd: error: --kubeconfig {missing}: no such file\n") == (code, err)


def test_a_dumps_configuration_is_checked_like_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad key in a dump's `config` is exit 78 naming the dump, for validate and cycle alike."""
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    dump = tmp_path / "dump.yaml"
    run(capsys, "dump", snapshot, "--now", NOW, "--out", str(dump))
    written = yaml.safe_load(dump.read_text())
    written["config"] = {"scheduler": {"actoins": ["allocate"]}}
    dump.write_text(yaml.safe_dump(written))
    line = f"{dump}: config: scheduler.actoins: unknown key (known: actions, cycle_interval)\n"
    assert (78, "", line) == run(capsys, "validate", str(dump))
    assert (78, "", line) == run(capsys, "cycle", str(dump))


@pytest.mark.asyncio
async def test_the_context_chooses_the_cluster_the_daemon_connects_to(tmp_path: Path) -> None:
    """`run --context NAME` connects to NAME's cluster, not the kubeconfig's current context."""
    from preemptd.daemon.backends.kubernetes.client import load_configuration

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "prod",
                "clusters": [
                    {"name": "prod", "cluster": {"server": "https://prod.example:6443"}},
                    {"name": "staging", "cluster": {"server": "https://staging.example:6443"}},
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "prod", "context": {"cluster": "prod", "user": "u"}},
                    {"name": "staging", "context": {"cluster": "staging", "user": "u"}},
                ],
            }
        )
    )
    assert "https://prod.example:6443" == (await load_configuration(kubeconfig=str(kubeconfig))).host
    staging = await load_configuration(kubeconfig=str(kubeconfig), context="staging")
    assert "https://staging.example:6443" == staging.host

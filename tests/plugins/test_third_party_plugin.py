"""The example third-party plugin, installed for real and driven through the CLI.

Entry points are read once per process, so every check runs ``python -m preemptd``
in a subprocess after the package is installed into the interpreter running the tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "plugins" / "preemptd-example-plugin"
DISTRIBUTION = "preemptd-example-plugin"
PLUGIN = "protect-namespace"
NOW = "2026-01-01T01:00:00Z"

ENABLED_WORDS = {"enabled", "yes", "on", "true"}
DISABLED_WORDS = {"disabled", "no", "off", "false"}

# One queue that may preempt within itself; a low-priority workload in namespace
# "protected" holds the whole quota, and a high-priority one needs all of it.
SNAPSHOT = """\
apiVersion: preemptd.io/v1alpha1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: preemptd.io/v1alpha1
kind: Queue
metadata: {name: team}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "4"}
  preemption:
    withinQueue: LowerPriority
---
apiVersion: preemptd.io/v1alpha1
kind: Workload
metadata:
  name: low
  namespace: protected
  uid: uid-low
  creationTimestamp: "2026-01-01T00:00:00Z"
spec:
  queueName: team
  priority: 0
  podSets:
  - {name: main, count: 1, requests: {cpu: "4"}}
status:
  admission:
    queue: team
    podSets:
    - {name: main, count: 1, flavors: {cpu: default}}
  admittedAt: "2026-01-01T00:00:00Z"
---
apiVersion: preemptd.io/v1alpha1
kind: Workload
metadata:
  name: high
  namespace: ml
  uid: uid-high
  creationTimestamp: "2026-01-01T00:30:00Z"
spec:
  queueName: team
  priority: 100
  podSets:
  - {name: main, count: 1, requests: {cpu: "4"}}
"""


def pip(*args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        pytest.fail(
            f"pip {' '.join(args)} exited {result.returncode}:\n{result.stdout}{result.stderr}"
        )


@pytest.fixture(scope="module")
def example_installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The example package, installed (not editable) into the running interpreter."""
    # Build from a copy so the example folder gets no build/ or egg-info litter.
    # --no-build-isolation keeps the test off the network; it needs a setuptools that
    # builds wheels by itself (>= 70.1), which scripts/setup installs.
    source = tmp_path_factory.mktemp("example") / "src"
    shutil.copytree(
        EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    pip("install", "--quiet", "--no-deps", "--no-build-isolation", str(source))
    yield
    pip("uninstall", "--yes", "--quiet", DISTRIBUTION)


def write_config(directory: Path, plugin_table: str | None) -> Path:
    config = directory / "preemptd.toml"
    config.write_text(plugin_table or "", encoding="utf-8")
    return config


def preemptd(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    # A wide terminal, so that no table cell is wrapped onto a second line.
    env = {**os.environ, "COLUMNS": "200"}
    result = subprocess.run(
        [sys.executable, "-m", "preemptd", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        pytest.fail(
            f"preemptd {' '.join(map(str, args))} exited {result.returncode}:\n"
            f"{result.stdout}{result.stderr}"
        )
    return result


def plugin_row(tmp_path: Path, plugin_table: str | None) -> list[str]:
    """The words of the `preemptd plugins` line that lists the example plugin."""
    output = preemptd("plugins", "--config", write_config(tmp_path, plugin_table), cwd=tmp_path)
    rows = [line.split() for line in output.stdout.splitlines() if PLUGIN in line.split()]
    assert len(rows) == 1, f"expected one line naming {PLUGIN}:\n{output.stdout}"
    return [word.strip("()[],:;").lower() for word in rows[0]]


def cycle(tmp_path: Path, plugin_table: str) -> dict[str, Any]:
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(SNAPSHOT, encoding="utf-8")
    config = write_config(tmp_path, plugin_table)
    args = ("cycle", snapshot, "--config", config, "--now", NOW, "--output", "json")
    decisions: dict[str, Any] = json.loads(preemptd(*args, cwd=tmp_path).stdout)
    return decisions


def summary(
    *,
    admitted: list[str],
    preempted: list[tuple[str, str, str, int | None]],
    pending: list[tuple[str, str]],
) -> dict[str, list[Any]]:
    return {"admitted": admitted, "preempted": preempted, "pending": pending}


def summarize(decisions: dict[str, Any]) -> dict[str, list[Any]]:
    """The parts of a `cycle --output json` result these tests pin down."""
    return summary(
        admitted=[entry["workload"] for entry in decisions["admitted"]],
        preempted=[
            (entry["workload"], entry["preemptor"], entry["reason"], entry["count"])
            for entry in decisions["preempted"]
        ],
        pending=[(entry["workload"], entry["reason"]) for entry in decisions["pending"]],
    )


ENABLED = f'[plugins.{PLUGIN}]\nenabled = true\nprotected_namespaces = ["protected"]\n'
DISABLED = f'[plugins.{PLUGIN}]\nenabled = false\nprotected_namespaces = ["protected"]\n'


@pytest.mark.usefixtures("example_installed")
def test_plugin_is_listed_with_its_distribution_as_source(tmp_path: Path) -> None:
    """`preemptd plugins` lists the installed example under its distribution's name."""
    row = plugin_row(tmp_path, ENABLED)
    assert any(DISTRIBUTION in word for word in row), row


@pytest.mark.usefixtures("example_installed")
@pytest.mark.parametrize(
    ("plugin_table", "expected_enabled"),
    [(None, False), (ENABLED, True), (DISABLED, False)],
    ids=["not-configured", "enabled-true", "enabled-false"],
)
def test_third_party_plugin_is_off_unless_enabled_in_toml(
    tmp_path: Path, plugin_table: str | None, expected_enabled: bool
) -> None:
    """A third-party plugin is disabled until its table says `enabled = true`."""
    row = set(plugin_row(tmp_path, plugin_table))
    assert bool(row & ENABLED_WORDS) != bool(row & DISABLED_WORDS), row
    assert expected_enabled == bool(row & ENABLED_WORDS)


@pytest.mark.usefixtures("example_installed")
def test_victim_in_protected_namespace_is_vetoed(tmp_path: Path) -> None:
    """With the plugin enabled the only candidate is vetoed, so the preemptor finds none."""
    decisions = cycle(tmp_path, ENABLED)
    expected = summary(admitted=[], preempted=[], pending=[("ml/high", "PreemptionNoCandidates")])
    assert expected == summarize(decisions)


@pytest.mark.usefixtures("example_installed")
def test_victim_is_preempted_when_the_plugin_is_disabled(tmp_path: Path) -> None:
    """With the plugin disabled the same snapshot preempts the low-priority workload in its queue."""
    decisions = cycle(tmp_path, DISABLED)
    expected = summary(
        admitted=[],
        preempted=[("protected/low", "ml/high", "InQueue", None)],
        pending=[("ml/high", "PendingPreemption")],
    )
    assert expected == summarize(decisions)


@pytest.mark.usefixtures("example_installed")
def test_the_example_plugin_declares_memo_safe_and_keeps_the_search_memo_on(tmp_path: Path) -> None:
    """The example's veto depends only on the victim's namespace and its configuration, so it
    declares MEMO_SAFE: with it enabled, `--timings` reports the search memo on."""
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(SNAPSHOT, encoding="utf-8")
    config = write_config(tmp_path, ENABLED)
    output = preemptd("cycle", snapshot, "--config", config, "--now", NOW, "--timings", cwd=tmp_path)
    memo = [line.split() for line in output.stderr.splitlines() if line.split()[:2] == ["count", "memo"]]
    assert [["count", "memo", "on"]] == memo, output.stderr


@pytest.mark.usefixtures("example_installed")
def test_an_empty_protection_list_protects_nothing(tmp_path: Path) -> None:
    """Enabled with no namespace to protect, the example tells the session at open that it
    allows every candidate: the low-priority workload is preempted as with it disabled."""
    decisions = cycle(tmp_path, f"[plugins.{PLUGIN}]\nenabled = true\nprotected_namespaces = []\n")
    expected = summary(
        admitted=[],
        preempted=[("protected/low", "ml/high", "InQueue", None)],
        pending=[("ml/high", "PendingPreemption")],
    )
    assert expected == summarize(decisions)

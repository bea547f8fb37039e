"""Which integrations run: built-ins on by default, third parties off until enabled, problems located."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from preemptd.daemon import cli
from preemptd.daemon.backends.kubernetes.client import JOBS, Resource
from preemptd.daemon.backends.kubernetes.integrations import Integration
from preemptd.daemon.backends.kubernetes.integrations.registry import (
    BUILTIN_INTEGRATIONS,
    resolve_integrations,
)
from preemptd.daemon.config import parse_config


class Widgets(Integration):
    name = "widgets"
    resource = Resource("example.com", "v1", "widgets", "Widget", namespaced=True)


class JobsAgain(Integration):
    name = "jobs-again"
    resource = JOBS


@dataclass
class FakeDist:
    name: str = "acme"
    version: str = "1.0"


@dataclass
class FakeEntryPoint:
    name: str
    target: Any
    dist: FakeDist | None = None

    def load(self) -> Any:
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


def resolve(text: str, *entry_points: FakeEntryPoint) -> tuple[tuple[str, ...], list[str]]:
    config, problems = parse_config(text, source="p.toml")
    assert [] == problems
    integrations, found = resolve_integrations(config, entry_points=[*entry_points])
    return integrations.names, [str(p) for p in found]


def test_every_built_in_is_on_and_an_installed_one_off_until_enabled() -> None:
    widgets = FakeEntryPoint("widgets", Widgets, FakeDist())
    assert (BUILTIN_INTEGRATIONS, []) == resolve("", widgets)
    assert ((*BUILTIN_INTEGRATIONS, "widgets"), []) == resolve("[integrations.widgets]\nenabled = true\n", widgets)


def test_a_built_in_is_turned_off_by_its_table() -> None:
    names, problems = resolve("[integrations.statefulset]\nenabled = false\n")
    assert [] == problems and "statefulset" not in names and "deployment" in names


def test_each_mistake_is_named_with_its_line_and_key() -> None:
    text = (
        "[integrations.nope]\nenabled = true\n"
        "[integrations.statefulset]\nenabled = \"yes\"\n"
        "[integrations.deployment]\nreplicas = 3\n"
        "[integrations.broken]\nenabled = true\n"
        "[integrations.jobs-again]\nenabled = true\n"
    )
    names, problems = resolve(
        text,
        FakeEntryPoint("broken", ImportError("no module named widgets_v2"), FakeDist()),
        FakeEntryPoint("jobs-again", JobsAgain, FakeDist()),
    )
    assert [
        "p.toml:1: integrations.nope: unknown integration (not installed)",
        "p.toml:4: integrations.statefulset.enabled: expected a boolean, got a string ('yes')",
        "p.toml:6: integrations.deployment.replicas: unknown key (known: enabled)",
        "p.toml:7: integrations.broken: cannot load integration 'broken': ImportError: no module named widgets_v2",
        "p.toml:9: integrations.jobs-again: integration 'jobs-again' manages Job, which 'job' already does",
    ] == sorted(problems)
    assert "job" in names and "statefulset" not in names
    assert "broken" not in names and "jobs-again" not in names


def test_an_entry_point_that_is_not_an_integration_is_refused() -> None:
    _, problems = resolve("[integrations.odd]\nenabled = true\n", FakeEntryPoint("odd", object(), FakeDist()))
    assert ["p.toml:1: integrations.odd: integration 'odd' is not an Integration (got object)"] == problems


def test_preemptd_validate_reports_a_bad_integration_table(tmp_path, capsys) -> None:
    """The configuration check every command runs covers [integrations] too: no silent success."""
    config = tmp_path / "preemptd.toml"
    config.write_text("[integrations.raycluster]\nenabled = 1\n")
    assert 78 == cli.main(["validate", "--config", str(config)])
    assert f"{config}:2: integrations.raycluster.enabled: expected a boolean, got an integer (1)" in capsys.readouterr().err

"""The TOML configuration and the choice of plugins (CONTRACT §4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from preemptd.daemon.config import (
    BackendConfig,
    Config,
    ConfigError,
    DaemonConfig,
    LeaderElectionConfig,
    SchedulerConfig,
    load_config,
    read_config,
)
from preemptd.daemon.plugins import BUILTINS, PluginInfo, resolve_plugins
from preemptd.framework.session import hookimpl

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "preemptd.toml"
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = write(tmp_path, text)
    _, problems = read_config(path)
    return [str(problem) for problem in problems]


# --- the daemon's own tables -------------------------------------------------------------


def test_no_file_gives_the_contract_defaults() -> None:
    """Without a file every section holds the defaults CONTRACT §4 lists."""
    expected = Config(
        scheduler=SchedulerConfig(actions=("allocate", "preempt"), cycle_interval=1000),
        backend=BackendConfig(kind="simulation"),
        daemon=DaemonConfig(http_address="127.0.0.1:8080", log_format="auto", log_level="info"),
        leader_election=LeaderElectionConfig(
            enabled=True,
            lease_namespace="preemptd-system",
            lease_name="preemptd",
            lease_duration=15_000,
            renew_deadline=10_000,
            retry_period=2_000,
        ),
    )
    assert (expected, []) == read_config(None)


def test_shipped_config_file_is_valid_and_spells_out_the_defaults() -> None:
    """config/preemptd.toml loads without problems and means the same as no file."""
    config = load_config(REPO / "config" / "preemptd.toml")
    defaults = Config()
    expected = (defaults.scheduler, defaults.backend, defaults.daemon, defaults.leader_election)
    assert expected == (config.scheduler, config.backend, config.daemon, config.leader_election)


def test_durations_are_read_as_milliseconds(tmp_path: Path) -> None:
    """Go-style durations become integer milliseconds."""
    path = write(tmp_path, '[scheduler]\ncycle_interval = "1m30s"\n[leader_election]\nlease_duration = "1h"\n')
    config = load_config(path)
    expected = (90_000, 3_600_000)
    assert expected == (config.scheduler.cycle_interval, config.leader_election.lease_duration)


def test_unknown_key_names_file_line_and_key(tmp_path: Path) -> None:
    """A misspelt key is reported at its line with its dotted path and the known keys."""
    text = "# preemptd\n[scheduler]\nactions = ['allocate']\ncycle_intervl = '2s'\n"
    expected = [
        f"{tmp_path / 'preemptd.toml'}:4: scheduler.cycle_intervl: unknown key "
        "(known: actions, cycle_interval)"
    ]
    assert expected == problems_of(tmp_path, text)


def test_unknown_section_is_reported_at_its_header(tmp_path: Path) -> None:
    """An unknown table is an unknown key at the line of its header."""
    expected = [
        f"{tmp_path / 'preemptd.toml'}:3: schedular: unknown key "
        "(known: scheduler, backend, daemon, leader_election, webhook, plugins, integrations)"
    ]
    assert expected == problems_of(tmp_path, "\n\n[schedular]\nactions = []\n")


def test_wrong_types_are_errors_naming_the_expectation(tmp_path: Path) -> None:
    """A string for a boolean, a bare number for a duration and an unknown choice are all wrong."""
    text = (
        "[leader_election]\n"
        'enabled = "yes"\n'
        "lease_duration = 15\n"
        "[daemon]\n"
        'log_format = "xml"\n'
    )
    file = tmp_path / "preemptd.toml"
    expected = [
        f"{file}:2: leader_election.enabled: expected a boolean, got a string ('yes')",
        f"{file}:3: leader_election.lease_duration: expected a duration string with a unit such as '90s', got 15",
        f"{file}:5: daemon.log_format: expected one of 'json', 'console', 'auto', got 'xml'",
    ]
    assert expected == problems_of(tmp_path, text)


def test_every_problem_is_reported_in_one_error(tmp_path: Path) -> None:
    """load_config raises one ConfigError that lists every problem, in line order."""
    text = (
        "[scheduler]\n"
        'actions = ["allocate", "shuffle"]\n'
        'cycle_interval = "0s"\n'
        "[backend]\n"
        'kind = "k8s"\n'
        "[leader_election]\n"
        'renew_deadline = "20s"\n'
    )
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    expected = [
        (2, "scheduler.actions"),
        (3, "scheduler.cycle_interval"),
        (5, "backend.kind"),
        (7, "leader_election.renew_deadline"),
    ]
    assert expected == [(problem.line, problem.key) for problem in raised.value.problems]


def test_invalid_toml_is_reported_with_its_line(tmp_path: Path) -> None:
    """A syntax error is one problem at the line tomllib names."""
    path = write(tmp_path, '[scheduler]\nactions = ["allocate"\n[backend]\n')
    _, problems = read_config(path)
    assert [(str(path), 3)] == [(problem.file, problem.line) for problem in problems]


def test_dotted_keys_and_quoted_names_are_located(tmp_path: Path) -> None:
    """Keys written as dotted paths or under quoted table names still get their own line."""
    text = 'scheduler.cycle_interval = "1s"\nscheduler.bogus = 1\n\n[plugins."priority"]\nenabled = 3\n'
    path = write(tmp_path, text)
    config, problems = read_config(path)
    expected = ([(2, "scheduler.bogus")], 5)
    assert expected == (
        [(problem.line, problem.key) for problem in problems],
        config.locate(("plugins", "priority", "enabled")),
    )


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    """A configuration file that cannot be read is a problem naming the file."""
    _, problems = read_config(tmp_path / "absent.toml")
    assert [str(tmp_path / "absent.toml")] == [problem.file for problem in problems]


# --- plugins -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FakeDist:
    name: str
    version: str


PREEMPTD = FakeDist("preemptd", "0.1.0")
ACME = FakeDist("acme-plugins", "1.2.3")


@dataclass(frozen=True)
class FakeEntryPoint:
    """An entry point of the group ``preemptd.plugins`` without installing anything."""

    name: str
    plugin: object
    dist: FakeDist | None = PREEMPTD

    def load(self) -> object:
        if isinstance(self.plugin, Exception):
            raise self.plugin
        return self.plugin


class Bare:
    """A plugin without settings."""

    @hookimpl
    def session_open(self, session: Any) -> None:
        return None


@dataclass(frozen=True)
class WindowSettings:
    method: Literal["lca", "queue"] = "lca"
    window: int = field(default=0, metadata={"duration": True})
    namespaces: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.window > 3_600_000:
            raise ValueError("window must be at most 1h")


class Windowed:
    """A plugin whose table is described by WindowSettings."""

    @hookimpl
    def plugin_config_schema(self) -> type:
        return WindowSettings


def builtins(*names: str) -> list[FakeEntryPoint]:
    return [FakeEntryPoint(name, Bare()) for name in names]


def resolve(tmp_path: Path, text: str, entry_points: list[FakeEntryPoint]) -> tuple[Any, list[str]]:
    config, problems = read_config(write(tmp_path, text))
    assert not problems, problems
    plugins, found = resolve_plugins(config, entry_points=entry_points)
    return plugins, [str(problem) for problem in found]


def test_builtins_run_in_their_fixed_order_then_third_party_in_config_order(tmp_path: Path) -> None:
    """Built-ins come first in the documented order, then enabled third-party plugins as the file names them."""
    text = "[plugins.zeta]\nenabled = true\n[plugins.alpha]\nenabled = true\n[plugins.priority]\n"
    found = [
        FakeEntryPoint("alpha", Bare(), ACME),
        *builtins(*reversed(BUILTINS)),
        FakeEntryPoint("zeta", Bare(), ACME),
    ]
    plugins, problems = resolve(tmp_path, text, found)
    expected = ([], (*BUILTINS, "zeta", "alpha"))
    assert expected == (problems, plugins.names)
    assert list(plugins.names) == plugins.registry().names


def test_builtin_is_off_only_with_enabled_false(tmp_path: Path) -> None:
    """`enabled = false` switches a built-in off; a table without `enabled` leaves it on."""
    text = "[plugins.min-runtime]\nenabled = false\n[plugins.priority]\n"
    plugins, problems = resolve(tmp_path, text, builtins(*BUILTINS))
    expected = ([], ("priority", "cohort-reclaim", "flavor-fungibility", "gpu-victims"))
    assert expected == (problems, plugins.names)


def test_third_party_plugin_is_off_unless_enabled(tmp_path: Path) -> None:
    """An installed third-party plugin is listed but does not run until its table enables it."""
    found = [*builtins("priority"), FakeEntryPoint("alpha", Bare(), ACME)]
    plugins, _ = resolve(tmp_path, "", found)
    expected = (("priority",), PluginInfo("alpha", "acme-plugins 1.2.3", requested=False, installed=True))
    assert expected == (plugins.names, plugins.infos[-1])


def test_uninstalled_builtin_is_accepted_and_listed(tmp_path: Path) -> None:
    """A built-in named in the file but not installed is no error; it is listed as not installed."""
    plugins, problems = resolve(tmp_path, "[plugins.gpu-victims]\nenabled = true\n", builtins("priority"))
    listed = PluginInfo("gpu-victims", "not installed", requested=True, installed=False)
    expected = ([], listed, ("priority",))
    assert expected == (problems, plugins.infos[4], plugins.names)


def test_unknown_plugin_is_an_error_at_its_table(tmp_path: Path) -> None:
    """A table for a plugin nobody installed is an error naming file, line and plugin."""
    _, problems = resolve(tmp_path, "[daemon]\n\n[plugins.nosuch]\nenabled = false\n", builtins())
    expected = [f"{tmp_path / 'preemptd.toml'}:3: plugins.nosuch: unknown plugin (not installed)"]
    assert expected == problems


def test_plugin_table_is_checked_through_its_schema(tmp_path: Path) -> None:
    """A plugin's keys are typed by its dataclass, and the instance reaches the registry."""
    text = '[plugins.windowed]\nenabled = true\nmethod = "queue"\nwindow = "5m"\nnamespaces = ["a"]\n'
    plugins, problems = resolve(tmp_path, text, [FakeEntryPoint("windowed", Windowed(), ACME)])
    expected = ([], WindowSettings(method="queue", window=300_000, namespaces=["a"]))
    assert expected == (problems, plugins.registry().configs["windowed"])


def test_plugin_table_errors_name_line_and_key(tmp_path: Path) -> None:
    """Unknown keys and wrong types in a plugin's table are errors at their lines."""
    text = (
        "[plugins.windowed]\n"
        "enabled = true\n"
        'method = "nearest"\n'
        "namespaces = [1]\n"
        "colour = 'red'\n"
    )
    _, problems = resolve(tmp_path, text, [FakeEntryPoint("windowed", Windowed(), ACME)])
    file = tmp_path / "preemptd.toml"
    expected = [
        f"{file}:3: plugins.windowed.method: expected one of 'lca', 'queue', got 'nearest'",
        f"{file}:4: plugins.windowed.namespaces: expected a string, got an integer (1)",
        f"{file}:5: plugins.windowed.colour: unknown key (known: method, window, namespaces)",
    ]
    assert expected == problems


def test_plugin_value_error_is_reported_with_the_plugin_name(tmp_path: Path) -> None:
    """A ValueError from the schema's __post_init__ becomes an error naming the plugin."""
    text = '[plugins.windowed]\nenabled = true\nwindow = "2h"\n'
    _, problems = resolve(tmp_path, text, [FakeEntryPoint("windowed", Windowed(), ACME)])
    expected = [f"{tmp_path / 'preemptd.toml'}:1: plugins.windowed: plugin 'windowed': window must be at most 1h"]
    assert expected == problems


def test_keys_for_a_plugin_without_schema_are_unknown(tmp_path: Path) -> None:
    """A plugin that declares no settings accepts only `enabled`."""
    _, problems = resolve(tmp_path, "[plugins.priority]\nweight = 2\n", builtins("priority"))
    expected = [f"{tmp_path / 'preemptd.toml'}:2: plugins.priority.weight: unknown key (the plugin has no settings)"]
    assert expected == problems


def test_plugin_that_cannot_be_loaded_is_a_config_error_only_when_enabled(tmp_path: Path) -> None:
    """A broken package fails the configuration when enabled and is ignored while off."""
    broken = FakeEntryPoint("alpha", ImportError("no module named alpha_impl"), ACME)
    _, off = resolve(tmp_path, "", [broken])
    _, on = resolve(tmp_path, "[plugins.alpha]\nenabled = true\n", [broken])
    expected = [
        f"{tmp_path / 'preemptd.toml'}:1: plugins.alpha: cannot load plugin 'alpha': "
        "ImportError: no module named alpha_impl"
    ]
    assert ([], expected) == (off, on)


def test_enabled_must_be_a_boolean(tmp_path: Path) -> None:
    """`enabled = "true"` is a wrong type, not a truthy value."""
    _, problems = resolve(tmp_path, '[plugins.priority]\nenabled = "false"\n', builtins("priority"))
    expected = [f"{tmp_path / 'preemptd.toml'}:2: plugins.priority.enabled: expected a boolean, got a string ('false')"]
    assert expected == problems

"""Misbehaving third-party plugins driven through ``preemptd cycle``: a wrong answer or a
raise of any kind (``sys.exit`` included) is that plugin's failure. It fails safe,
is reported once per plugin and hook with the plugin's name, and the session ends
with the other plugins' decisions.

The plugin is offered as an installed entry point (``installed_entry_points`` is
replaced for the test) and enabled in TOML, as a user would.

The snapshot: one queue (cpu 4, withinQueue LowerPriority); ``ns/low`` (priority 0,
cpu 4) runs, ``ml/high`` (priority 100, cpu 4) is pending. SEMANTICS §4: Available
0 < 4 → search; low (0 < 100) is the only candidate; evicting it frees 4 ≥ 4 →
victims {low}, reason InQueue, high PendingPreemption.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from preemptd.daemon import plugins as plugins_module
from preemptd.daemon.cli import main
from preemptd.framework.session import hookimpl

NOW = "2026-01-01T01:00:00Z"
SNAPSHOT = """\
apiVersion: preemptd.io/v1alpha1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: preemptd.io/v1alpha1
kind: Queue
metadata: {name: team}
spec:
  preemption: {withinQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "4"}
---
apiVersion: preemptd.io/v1alpha1
kind: Workload
metadata: {name: low, namespace: ns, uid: uid-low, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  queueName: team
  priority: 0
  podSets: [{name: main, count: 1, requests: {cpu: "4"}}]
status:
  admission:
    queue: team
    podSets: [{name: main, count: 1, flavors: {cpu: default}}]
  admittedAt: "2026-01-01T00:00:00Z"
---
apiVersion: preemptd.io/v1alpha1
kind: Workload
metadata: {name: high, namespace: ml, uid: uid-high, creationTimestamp: "2026-01-01T00:30:00Z"}
spec:
  queueName: team
  priority: 100
  podSets: [{name: main, count: 1, requests: {cpu: "4"}}]
"""

PREEMPTS_LOW = {
    "admitted": [],
    "preempted": [("ns/low", "ml/high", "InQueue")],
    "pending": [("ml/high", "PendingPreemption")],
}


class _Dist:
    def __init__(self, name: str | None, version: str | None = "1.0") -> None:
        self.name = name
        self.version = version


class _EntryPoint:
    def __init__(self, name: str, plugin: object, dist: _Dist | None, value: str = "") -> None:
        self.name = name
        self.value = value or f"misbehaving_{name.replace('-', '_')}"
        self.dist = dist
        self._plugin = plugin

    def load(self) -> object:
        return self._plugin


def _plugin(**hooks: Callable[..., Any]) -> SimpleNamespace:
    return SimpleNamespace(**{name: hookimpl(fn) for name, fn in hooks.items()})


@pytest.fixture
def offer(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Offer extra entry points next to the installed ones."""
    real = plugins_module.installed_entry_points

    def install(*extra: _EntryPoint) -> None:
        def entry_points(warnings: list[str] | None = None) -> list[Any]:
            return plugins_module.choose_entry_points([*real(), *extra], warnings)

        monkeypatch.setattr(plugins_module, "installed_entry_points", entry_points)

    return install


def _cycle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str = "[plugins.bad]\nenabled = true\n"
) -> tuple[int, dict[str, Any], str]:
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(SNAPSHOT, encoding="utf-8")
    toml = tmp_path / "preemptd.toml"
    toml.write_text(config, encoding="utf-8")
    code = main(["cycle", str(snapshot), "--config", str(toml), "--now", NOW, "--output", "json"])
    captured = capsys.readouterr()
    decisions = json.loads(captured.out) if captured.out.strip() else {}
    return code, decisions, captured.err


def _summary(decisions: dict[str, Any]) -> dict[str, list[Any]]:
    return {
        "admitted": [a["workload"] for a in decisions["admitted"]],
        "preempted": [(p["workload"], p["preemptor"], p["reason"]) for p in decisions["preempted"]],
        "pending": [(p["workload"], p["reason"]) for p in decisions["pending"]],
    }


def _warnings_about(err: str, plugin: str) -> list[str]:
    return [line for line in err.splitlines() if f"plugin {plugin} " in line]


def _hooks_failed(err: str, plugin: str) -> set[str]:
    """The hooks named in the plugin's warnings ("... failed in HOOK (n calls): ...")."""
    return {
        line.split(" failed in ")[1].split(":")[0].split(" (")[0]
        for line in _warnings_about(err, plugin)
    }


def _bad(plugin: SimpleNamespace) -> _EntryPoint:
    return _EntryPoint("bad", plugin, _Dist("preemptd-bad"))


def test_preemption_candidates_of_the_wrong_type_are_dropped_and_reported_once(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[1, "x", None] as candidates is the plugin's failure: no candidates from it, the built-ins still decide, one warning names it."""

    def preemption_candidates(session: Any, preemptor: Any, assignment: Any) -> list[Any]:
        return [1, "x", None]

    offer(_bad(_plugin(preemption_candidates=preemption_candidates)))
    code, decisions, err = _cycle(tmp_path, capsys)
    assert code == 0
    assert _summary(decisions) == PREEMPTS_LOW
    (warning,) = _warnings_about(err, "bad")
    assert "preemption_candidates" in warning and "expected a list of Candidate" in warning


def test_non_bool_is_preemptible_is_a_failure_and_vetoes(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """is_preemptible answering "yes" is not "allow": the candidate is not preemptible (fail safe) and the plugin is reported."""

    def is_preemptible(session: Any, action: str, preemptor: Any, preemptee: Any) -> object:
        return "yes"

    offer(_bad(_plugin(is_preemptible=is_preemptible)))
    code, decisions, err = _cycle(tmp_path, capsys)
    assert code == 0
    # low is the only candidate and is vetoed → no victims (SEMANTICS §4).
    assert _summary(decisions) == {
        "admitted": [],
        "preempted": [],
        "pending": [("ml/high", "PreemptionNoCandidates")],
    }
    (warning,) = _warnings_about(err, "bad")
    assert "is_preemptible" in warning and "TypeError" in warning


def test_session_state_clobbered_at_session_open_is_the_plugins_failure(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """session.state = None in session_open fails that plugin's hook; the session runs on as without it."""

    def session_open(session: Any) -> None:
        session.state = None

    offer(_bad(_plugin(session_open=session_open)))
    code, decisions, err = _cycle(tmp_path, capsys)
    assert code == 0
    assert _summary(decisions) == PREEMPTS_LOW
    (warning,) = _warnings_about(err, "bad")
    assert "session_open" in warning and "read-only" in warning


def test_other_session_attributes_cannot_be_replaced_or_deleted(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Replacing session.accounting or deleting session.taken is refused in the plugin's own hook."""

    def session_open(session: Any) -> None:
        session.accounting = None

    def session_close(session: Any) -> None:
        del session.taken

    offer(_bad(_plugin(session_open=session_open, session_close=session_close)))
    code, decisions, err = _cycle(tmp_path, capsys)
    assert code == 0
    assert _summary(decisions) == PREEMPTS_LOW
    warnings = _warnings_about(err, "bad")
    assert len(warnings) == 2
    assert any("session_open" in w for w in warnings) and any("session_close" in w for w in warnings)


def test_sys_exit_in_a_hook_is_contained(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """sys.exit from a hook does not end the command with empty output: it is the plugin's failure."""

    def session_open(session: Any) -> None:
        sys.exit(0)

    def is_preemptible(session: Any, action: str, preemptor: Any, preemptee: Any) -> bool:
        raise SystemExit(3)

    offer(_bad(_plugin(session_open=session_open, is_preemptible=is_preemptible)))
    code, decisions, err = _cycle(tmp_path, capsys)
    assert code == 0
    # The raising is_preemptible vetoes low (fail safe) → no victims.
    assert _summary(decisions) == {
        "admitted": [],
        "preempted": [],
        "pending": [("ml/high", "PreemptionNoCandidates")],
    }
    warnings = _warnings_about(err, "bad")
    assert _hooks_failed(err, "bad") == {"session_open", "is_preemptible"}
    assert all("SystemExit" in w for w in warnings)


def test_wrong_order_keys_and_filters_are_ignored(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A non-callable order key, a filter list of non-callables and a filter answering a non-bool are each reported; order and victims are the built-ins'."""

    def workload_order(session: Any) -> object:
        return 42

    def victim_order(session: Any, preemptor: Any) -> object:
        return "not a key"

    def get_accumulated_scenario_filters(session: Any, action: str, preemptor: Any) -> object:
        return [None]

    offer(
        _bad(
            _plugin(
                workload_order=workload_order,
                victim_order=victim_order,
                get_accumulated_scenario_filters=get_accumulated_scenario_filters,
            )
        )
    )
    code, decisions, err = _cycle(tmp_path, capsys)
    assert code == 0
    assert _summary(decisions) == PREEMPTS_LOW
    assert _hooks_failed(err, "bad") == {"workload_order", "victim_order", "get_accumulated_scenario_filters"}


def test_scenario_filter_answering_a_non_bool_rejects_the_scenario(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scenario filter answering "ok" is a failure, not an acceptance: the scenario is rejected."""

    def get_accumulated_scenario_filters(session: Any, action: str, preemptor: Any) -> object:
        return [lambda scenario: "ok"]

    offer(_bad(_plugin(get_accumulated_scenario_filters=get_accumulated_scenario_filters)))
    code, decisions, err = _cycle(tmp_path, capsys)
    assert code == 0
    assert _summary(decisions) == {
        "admitted": [],
        "preempted": [],
        "pending": [("ml/high", "PreemptionNoCandidates")],
    }
    (warning,) = _warnings_about(err, "bad")
    assert "scenario_filter" in warning and "expected a bool" in warning


def test_assign_flavors_of_the_wrong_type_falls_back_to_the_default(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With flavor-fungibility off, a third-party assign_flavors answering a string is ignored: the framework's first-fit assignment is used."""

    def assign_flavors(session: Any, workload: Any) -> object:
        return "default"

    offer(_bad(_plugin(assign_flavors=assign_flavors)))
    config = "[plugins.bad]\nenabled = true\n[plugins.flavor-fungibility]\nenabled = false\n"
    code, decisions, err = _cycle(tmp_path, capsys, config)
    assert code == 0
    assert _summary(decisions) == PREEMPTS_LOW
    (warning,) = _warnings_about(err, "bad")
    assert "assign_flavors" in warning and "expected an Assignment" in warning


def test_a_hook_failing_on_every_call_is_reported_once_with_its_count(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One warning per plugin and hook, however many calls failed, with the number of calls."""
    calls: list[int] = []

    def workload_order(session: Any) -> Callable[[Any], Any]:
        def key(workload: Any) -> Any:
            calls.append(1)
            raise RuntimeError("boom")

        return key

    offer(_bad(_plugin(workload_order=workload_order)))
    code, decisions, err = _cycle(tmp_path, capsys)
    assert code == 0
    assert _summary(decisions) == PREEMPTS_LOW
    assert len(calls) >= 1
    (warning,) = _warnings_about(err, "bad")
    times = f" ({len(calls)} calls)" if len(calls) > 1 else ""
    assert warning == f"warning: plugin bad failed in workload_order{times}: RuntimeError: boom"


def test_registry_describes_each_plugin_and_hook_once_and_counts_every_failure() -> None:
    """Three failing calls of one hook: failures counts 3, errors holds one entry (count 3) with the first traceback; a wrong answer is counted like a raise."""
    from preemptd.framework.session import Registry

    def workload_order(session: Any) -> object:
        raise RuntimeError("boom")

    def victim_order(session: Any, preemptor: Any) -> object:
        return 42

    registry = Registry([("bad", _plugin(workload_order=workload_order, victim_order=victim_order), None)])
    for _ in range(3):
        assert registry.call_all("workload_order", session=None) == []
    assert registry.call_all("victim_order", session=None, preemptor=None) == []
    assert registry.failures["bad"] == 4
    assert [(e.plugin, e.hook, e.count) for e in registry.errors] == [
        ("bad", "workload_order", 3),
        ("bad", "victim_order", 1),
    ]
    assert "RuntimeError: boom" in registry.errors[0].traceback
    assert registry.errors[1].message == (
        "TypeError: returned int 42, expected a callable sort key"
    )


def test_daemon_failure_log_warns_at_most_once_per_interval_and_traces_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Across sessions, a failing plugin hook is warned about once per interval (with the count since the last warning) and its traceback logged once at debug."""
    import logging

    from preemptd.daemon.plugins import FailureLog
    from preemptd.framework.session import Registry

    def workload_order(session: Any) -> object:
        raise RuntimeError("boom")

    log = logging.getLogger("test.failurelog")
    failures = FailureLog(interval=60.0)
    caplog.set_level(logging.DEBUG, logger="test.failurelog")
    for now in (0.0, 10.0, 20.0, 70.0):  # one session each, two failing calls per session
        registry = Registry([("bad", _plugin(workload_order=workload_order), None)])
        registry.call_all("workload_order", session=None)
        registry.call_all("workload_order", session=None)
        failures.report(registry, log, now)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    debugs = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert warnings == [
        "plugin bad failed in workload_order (2 time(s) since the last warning): RuntimeError: boom",
        "plugin bad failed in workload_order (6 time(s) since the last warning): RuntimeError: boom",
    ]
    assert len(debugs) == 1 and "Traceback" in debugs[0] and "RuntimeError: boom" in debugs[0]


def test_entry_point_collision_with_a_nameless_distribution_is_a_warning(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two distributions offering entry point "bad", one without a Name: every command still runs; a warning names the entry point and the one ignored."""

    def is_preemptible(session: Any, action: str, preemptor: Any, preemptee: Any) -> bool:
        return True

    offer(
        _EntryPoint("bad", _plugin(is_preemptible=is_preemptible), _Dist(None, None), "nameless_mod"),
        _EntryPoint("bad", _plugin(is_preemptible=is_preemptible), _Dist("preemptd-bad")),
    )
    code, decisions, err = _cycle(tmp_path, capsys)
    assert code == 0
    assert _summary(decisions) == PREEMPTS_LOW
    assert (
        "warning: plugin entry point 'bad' is offered twice: using the one of distribution "
        "'preemptd-bad' (misbehaving_bad), ignoring the one of a distribution without a Name "
        "(nameless_mod)"
    ) in err.splitlines()
    toml = tmp_path / "preemptd.toml"
    assert main(["plugins", "--config", str(toml)]) == 0
    assert "preemptd-bad" in capsys.readouterr().out


def test_plugins_says_a_third_party_assign_flavors_is_never_called(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With flavor-fungibility on, `preemptd plugins` notes that an enabled plugin's assign_flavors is never called; with it off, nothing is said."""

    def assign_flavors(session: Any, workload: Any) -> None:
        return None

    offer(_bad(_plugin(assign_flavors=assign_flavors)))
    toml = tmp_path / "preemptd.toml"
    toml.write_text("[plugins.bad]\nenabled = true\n", encoding="utf-8")
    assert main(["plugins", "--config", str(toml)]) == 0
    captured = capsys.readouterr()
    assert (
        "note: bad implements assign_flavors, but flavor-fungibility answers it first for every "
        "workload, so it is never called (disable flavor-fungibility to use it)"
    ) in captured.out.splitlines()
    toml.write_text(
        "[plugins.bad]\nenabled = true\n[plugins.flavor-fungibility]\nenabled = false\n",
        encoding="utf-8",
    )
    assert main(["plugins", "--config", str(toml)]) == 0
    assert "assign_flavors" not in capsys.readouterr().out


def test_sys_exit_while_loading_a_plugin_is_a_configuration_error(
    offer: Callable[..., None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plugin whose loading calls sys.exit is reported as not loadable (exit 78), naming it."""

    class _Exits(_EntryPoint):
        def load(self) -> object:
            sys.exit(0)

    offer(_Exits("bad", None, _Dist("preemptd-bad")))
    code, decisions, err = _cycle(tmp_path, capsys)
    assert code == 78
    assert decisions == {}
    assert "cannot load plugin 'bad': SystemExit: 0" in err


def test_an_interrupt_that_a_finally_turned_into_another_error_is_not_a_plugin_failure() -> None:
    """Ctrl-C arrives inside a hook whose ``finally`` then fails (a rollback cut short raises
    KeyError): the registry raises the interrupt again instead of recording a failure of the
    plugin, so the command stops; a plain KeyError is still the plugin's failure."""
    from preemptd.framework.session import Registry

    def interrupted(session: Any) -> object:
        try:
            raise KeyboardInterrupt
        finally:
            {}["undo"]  # the cleanup fails while the interrupt propagates

    def broken(session: Any) -> object:
        return {}["undo"]

    registry = Registry([("cut", _plugin(session_open=interrupted), None)])
    with pytest.raises(KeyboardInterrupt):
        registry.call_all("session_open", session=None)
    assert registry.failures["cut"] == 0 and registry.errors == []

    registry = Registry([("broken", _plugin(session_open=broken), None)])
    assert registry.call_all("session_open", session=None) == []
    assert registry.failures["broken"] == 1

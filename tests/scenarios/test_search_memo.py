"""The search memo changes nothing but the time taken (framework/preemption/memo.py).

Every scenario case, a few small generated clusters and random clusters are decided
twice: with the memo (the default) and on the plain path (``run_session(memo=False)``),
and the decisions JSON must be byte for byte the same, as must the vetoes each plugin
was counted for. A plugin that does not declare ``MEMO_SAFE`` turns the memo off.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.daemon import cli
from preemptd.daemon.cli import main
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, hookimpl
from preemptd.framework.testing import cohort, inventory, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, flavor_fungibility, min_runtime, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import CONTENDED, NOW_MS, generate_saturated, generate_spec

CASES = sorted((Path(__file__).parent / "cases").glob("*.yaml"))


def _cycle(case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    snapshot_file = tmp_path / "snapshot.yaml"
    snapshot_file.write_text(yaml.safe_dump_all(case["objects"], sort_keys=False), encoding="utf-8")
    now = case["now"]
    text = now if isinstance(now, str) else now.strftime("%Y-%m-%dT%H:%M:%SZ")
    argv = ["cycle", str(snapshot_file), "--output", "json", "--now", text]
    if case.get("config"):
        config = tmp_path / "preemptd.toml"
        config.write_text(case["config"], encoding="utf-8")
        argv += ["--config", str(config)]
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_memo_decides_every_scenario_case_as_the_plain_path(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    fast = _cycle(case, tmp_path, capsys)
    monkeypatch.setattr(cli, "run_session", functools.partial(run_session, memo=False))
    plain = _cycle(case, tmp_path, capsys)
    assert fast == plain


def _both(snap_of: Callable[[], Any], registry_of: Callable[[], Registry], actions: tuple[str, ...]) -> list[Any]:
    """Decisions JSON, plugin vetoes and counters of the memo path and the plain path."""
    out = []
    for memo in (True, False):
        registry = registry_of()
        counters: dict[str, int | str] = {}
        decisions = run_session(snap_of(), registry, actions=actions, counters=counters, memo=memo)
        out.append((decisions.to_json(), dict(registry.vetoes), counters))
    return out


GENERATED = {
    "saturated-tiny": lambda: generate_saturated(1, queues=10, workloads=300),
    "contended-tiny": lambda: generate_spec(
        replace(CONTENDED, nodes=40, workloads=250, queues=10, leaves_per_cohort=5), "memo-test/contended"
    ),
}


@pytest.mark.parametrize("shape", sorted(GENERATED))
def test_memo_decides_small_generated_clusters_as_the_plain_path(shape: str) -> None:
    objects = GENERATED[shape]()
    actions, registry_of = default_session()
    (fast, fast_vetoes, fast_counts), (plain, plain_vetoes, plain_counts) = _both(
        lambda: snapshot(objects, NOW_MS), registry_of, actions
    )
    assert fast == plain
    assert fast_vetoes == plain_vetoes
    assert plain_counts["memo-hits"] == 0 and plain_counts["memo"] == "off (switched off)"
    # The memo did answer something, and every answer is a search not run.
    assert isinstance(fast_counts["memo-hits"], int) and fast_counts["memo-hits"] > 0
    assert fast_counts["victim-searches"] + fast_counts["memo-hits"] == plain_counts["victim-searches"]


CPU = ("default", "cpu")


def _random_cluster(seed: int) -> Any:
    rnd = random.Random(seed)
    queues = [cohort("root"), cohort("c1", "root"), cohort("c2", "root")]
    names = []
    for i in range(rnd.randint(2, 6)):
        names.append(f"q{i}")
        queues.append(
            queue(
                f"q{i}",
                rnd.choice(["c1", "c2"]),
                cpu=rnd.randint(0, 8),
                borrowing_limit=rnd.choice([None, 0, 2, 5]),
                lending_limit=rnd.choice([None, 0, 1, 3]),
                preemption=PreemptionPolicy(
                    within_queue=rnd.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
                    reclaim_within_cohort=rnd.choice(["Never", "LowerPriority", "Any"]),
                    borrow_within_cohort=rnd.choice(["Never", "LowerPriority"]),
                ),
                preempt_min_runtime=rnd.choice([None, 30_000]),
                reclaim_min_runtime=rnd.choice([None, 60_000]),
            )
        )
    workloads = []
    used: dict[str, int] = {}
    for i in range(rnd.randint(1, 30)):
        q = rnd.choice(names)
        cpu = rnd.randint(1, 6)
        admit = rnd.random() < 0.5 and used.get(q, 0) + cpu <= 8
        if admit:
            used[q] = used.get(q, 0) + cpu
        workloads.append(
            workload(
                f"w{i}", q, cpu, priority=rnd.randint(0, 3), created=rnd.randint(0, 50), admitted=admit,
                admitted_at=rnd.randint(0, 100_000) if admit else None,
            )
        )
    return inventory(queues, workloads)


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
def test_memo_decides_random_clusters_as_the_plain_path(seed: int) -> None:
    parsed = _random_cluster(seed)

    def registry() -> Registry:
        return Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None),
                         ("min-runtime", min_runtime, None)])

    (fast, fast_vetoes, _), (plain, plain_vetoes, _) = _both(
        lambda: snapshot(parsed, 100_000), registry, ("allocate", "preempt")
    )
    assert fast == plain
    assert fast_vetoes == plain_vetoes


def test_a_plugin_without_memo_safe_turns_the_memo_off() -> None:
    """A third-party plugin that answers a search hook without declaring MEMO_SAFE gets
    the plain path: every search runs, and the counters say which plugin turned it off."""
    calls: list[str] = []

    @hookimpl
    def is_preemptible(session: Any, action: str, preemptor: Any, preemptee: Any) -> bool | None:
        calls.append(preemptor.key)
        return None

    undeclared = SimpleNamespace(is_preemptible=is_preemptible)
    declared = SimpleNamespace(is_preemptible=is_preemptible, MEMO_SAFE=True)
    parsed = inventory(
        [cohort("root"), queue("a", "root", cpu=4, preemption=PreemptionPolicy(within_queue="LowerPriority"))],
        [
            workload("low", "a", 4, priority=0, created=1, admitted=True),
            workload("high", "a", 4, priority=5, created=2),
        ],
    )
    results = {}
    for name, extra in (("undeclared", undeclared), ("declared", declared)):
        calls.clear()
        counters: dict[str, int | str] = {}
        registry = Registry(
            [("priority", priority, None), ("flavor-fungibility", flavor_fungibility, None), ("third-party", extra, None)]
        )
        decisions = run_session(snapshot(parsed, 100_000), registry, counters=counters)
        results[name] = (decisions.to_json(), counters, len(calls))
    assert results["undeclared"][1]["memo"] == "off (plugin third-party does not declare MEMO_SAFE)"
    assert results["undeclared"][1]["memo-hits"] == 0
    assert results["declared"][1]["memo"] == "on"
    # The flavor scan's search is reused by finish_assignment only when declared.
    assert results["declared"][1]["memo-hits"] == 1
    assert results["undeclared"][2] == 2 * results["declared"][2]
    assert results["undeclared"][0] == results["declared"][0]


def test_a_commit_bumps_the_epoch_of_the_trees_it_changed_only() -> None:
    """Two separate queue trees: a kept change of one moves its epoch, not the other's;
    a change rolled back to the last commit moves nothing."""
    from preemptd.framework.quota import Accounting, QuotaTree
    from preemptd.framework.session import Statement

    tree = QuotaTree({q.name: q for q in [queue("a", cpu=4), queue("b", cpu=4)]})
    statement = Statement(Accounting(tree), None)
    a, b = tree.leaves["a"], tree.leaves["b"]
    statement.add_usage(a, {CPU: 1000})
    statement.rollback()
    statement.commit()
    assert (statement.epoch(a), statement.epoch(b)) == (0, 0)
    statement.add_usage(a, {CPU: 1000})
    statement.commit()
    assert (statement.epoch(a), statement.epoch(b)) == (1, 0)
    statement.commit()  # nothing new kept
    assert (statement.epoch(a), statement.epoch(b)) == (1, 0)


def test_cycle_timings_print_the_session_counters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = yaml.safe_load(CASES[0].read_text(encoding="utf-8"))
    snapshot_file = tmp_path / "snapshot.yaml"
    snapshot_file.write_text(yaml.safe_dump_all(case["objects"], sort_keys=False), encoding="utf-8")
    assert main(["cycle", str(snapshot_file), "--now", "2026-01-01T12:00:00Z", "--timings"]) == 0
    err = capsys.readouterr().err
    for name in ("nominations", "flavors-scanned", "victim-searches", "memo-hits", "candidates-examined"):
        assert f"count {name} " in err
    assert "count memo on" in err


def test_flavor_fungibility_hands_its_option_over_and_counts_the_search_as_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A head of one podSet and one resource group that needs victims: the flavor scan
    searches once, and finish_assignment takes the chosen option's search from the memo
    without keying it again; the veto is counted as if the search had been asked twice
    (as before the option was handed over), on the memo path and on the plain path."""
    from preemptd.framework.preemption import memo as memo_module
    from preemptd.framework.preemption import victims as victims_module

    keyed = []
    real_key = memo_module.memo_key

    def counting_key(*args: Any) -> Any:
        keyed.append(args[1].key)
        return real_key(*args)

    monkeypatch.setattr(victims_module, "memo_key", counting_key)

    class Veto:
        MEMO_SAFE = True

        @staticmethod
        @hookimpl
        def is_preemptible(session: Any, action: str, preemptor: Any, preemptee: Any) -> bool | None:
            return False if preemptee.workload.key.endswith("/guarded") else None

    parsed = inventory(
        [cohort("root"), queue("a", "root", cpu=8, preemption=PreemptionPolicy(within_queue="LowerPriority"))],
        [
            # The newer of two equals is the first victim tried: "guarded" is asked first.
            workload("low", "a", 4, priority=0, created=1, admitted=True),
            workload("guarded", "a", 4, priority=0, created=2, admitted=True),
            workload("high", "a", 4, priority=5, created=3),
        ],
    )
    outputs = []
    for memo in (True, False):
        keyed.clear()
        registry = Registry(
            [("priority", priority, None), ("flavor-fungibility", flavor_fungibility, None), ("veto", Veto(), None)]
        )
        counters: dict[str, int | str] = {}
        decisions = run_session(snapshot(parsed, 100_000), registry, counters=counters, memo=memo)
        outputs.append(decisions.to_json())
        assert [p.workload for p in decisions.preempted] == ["ns/low"]
        # Asked twice: by the scan and once more by finish_assignment.
        assert registry.vetoes["veto"] == 2
        if memo:
            assert keyed == ["ns/high"], "the option's search is not keyed a second time"
            assert (counters["victim-searches"], counters["memo-hits"]) == (1, 1)
        else:
            assert counters["victim-searches"] == 2
    assert outputs[0] == outputs[1]

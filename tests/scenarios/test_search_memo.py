"""The search memo changes nothing but the time taken (framework/preemption/memo.py).

Every scenario case, a few small generated clusters and random clusters are decided
twice: with the memo (the default) and on the plain path (``run_session(memo=False)``),
and the decisions JSON must be the same, as must the vetoes each plugin was counted
for. The one difference allowed is the pending message of a head whose search a failed
search dominated: it names the head it was judged with, which must be a pending head
of the same queue with no lower priority. A plugin that does not declare ``MEMO_SAFE``
turns the memo off.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Callable, Mapping
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
from preemptd.framework.model import PreemptionPolicy, Workload
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, hookimpl
from preemptd.framework.testing import cohort, inventory, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, flavor_fungibility, min_runtime, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import CONTENDED, NOW_MS, generate_saturated, generate_spec

CASES = sorted((Path(__file__).parent / "cases").glob("*.yaml"))
JUDGED = re.compile(r" \(judged with ([^:]+): no lower priority, asking for no more\)")


NO_SET = "no set of preemptible victims frees enough room"
NO_CANDIDATE = "no running workload that uses the needed quota may be preempted"


def assert_same_decisions(fast: str, plain: str, workloads: Mapping[str, Workload] | None = None) -> int:
    """``fast`` decides as ``plain``: the same admissions, victims and pending reasons. The
    one difference allowed is a dominated head's pending message: its judge's answer,
    naming the judge. The judge found no set of victims, or no candidate at all; the
    judged head, offered only some of the judge's candidates, may have had none (the
    plain path then says so). The judge must be a pending head and, given the
    ``workloads``, one of the same queue that is no weaker (a higher priority, or the
    same and created no later) whose search, for one of its pod sets, asked for no more of
    any resource. How many messages named a judge."""
    if fast == plain:
        return 0
    fast_json, plain_json = json.loads(fast), json.loads(plain)
    fast_pending, plain_pending = fast_json.pop("pending"), plain_json.pop("pending")
    assert fast_json == plain_json
    assert len(fast_pending) == len(plain_pending)
    pending = {entry["workload"] for entry in fast_pending}
    named = 0
    for entry, expected in zip(fast_pending, plain_pending, strict=True):
        message = entry.pop("message")
        wanted = expected.pop("message")
        assert entry == expected
        found = JUDGED.search(message)
        if found is None:
            assert message == wanted
            continue
        named += 1
        base = JUDGED.sub("", message)
        assert base == wanted or base.replace(NO_SET, NO_CANDIDATE) == wanted
        assert found.group(1) in pending
        if workloads is not None:
            judge, judged = workloads[found.group(1)], workloads[entry["workload"]]
            assert judge.queue == judged.queue
            assert (judge.priority, -judge.created) >= (judged.priority, -judged.created)
            # The judge's failed search asked for one of its pod sets (with what earlier
            # pod sets took of the same flavor): the judged head asks for no less.
            resources = {r for w in (judge, judged) for ps in w.pod_sets for r in ps.requests}
            asked = {r: sum(ps.requests.get(r, 0) * ps.count for ps in judged.pod_sets) for r in resources}
            assert any(
                all(ps.requests.get(r, 0) * ps.count <= asked[r] for r in resources) for ps in judge.pod_sets
            )
    assert named
    return named


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
    assert_same_decisions(fast, plain)


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
    named = assert_same_decisions(fast, plain, snapshot(objects, NOW_MS).workloads)
    assert fast_vetoes == plain_vetoes
    assert plain_counts["memo-hits"] == 0 and plain_counts["memo"] == "off (switched off)"
    assert plain_counts["searches-dominated"] == 0
    # The memo did answer something, and every answer, from memory or by a failed search
    # that dominates it, is a search not run.
    assert isinstance(fast_counts["memo-hits"], int) and fast_counts["memo-hits"] > 0
    searched = fast_counts["victim-searches"], fast_counts["memo-hits"], fast_counts["searches-dominated"]
    # A head judged without a scan asks its finish search only when it had no candidates
    # (answered as dominated), never its flavors' searches and their repeat.
    judged = fast_counts["heads-judged"]
    assert isinstance(judged, int) and plain_counts["heads-judged"] == 0
    assert sum(searched) <= plain_counts["victim-searches"]
    assert (judged == 0) == (sum(searched) == plain_counts["victim-searches"])
    # Every dominated answer was an assignment's (finish_assignment asks it again, from the
    # memo): the pending messages naming a head are at most those answers.
    assert named <= fast_counts["searches-dominated"]


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
    assert_same_decisions(fast, plain, parsed.workloads)
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


def _dominance_cluster(protect_low: bool, borrow_within_cohort: str = "Never") -> Any:
    """Queue a (4 cores, LowerPriority; reclaim ``Any``, so a head without candidates
    reserves nothing) runs ``low`` (1 core, priority 1) and ``top`` (3 cores, priority 9):
    it is full. Pending, in queue order: ``h1`` (priority 5, 3
    cores), ``h1b`` (priority 5, created later, 3 cores), ``h2`` (priority 4, 4 cores),
    ``h3`` (priority 3, 1 core), ``h4`` (priority 2, 3 cores). With ``protect_low``,
    ``low`` was admitted 10 s ago under a 60 s preempt min-runtime; without it no queue
    has a window, so min-runtime may refuse nothing in the session."""
    policy = PreemptionPolicy(
        within_queue="LowerPriority", reclaim_within_cohort="Any", borrow_within_cohort=borrow_within_cohort
    )
    admitted_at = 100_000 - 10_000 if protect_low else 0
    window = 60_000 if protect_low else None
    return inventory(
        [cohort("root"), queue("a", "root", cpu=4, preemption=policy, preempt_min_runtime=window)],
        [
            workload("low", "a", 1, priority=1, created=1, admitted=True, admitted_at=admitted_at),
            workload("top", "a", 3, priority=9, created=2, admitted=True, admitted_at=0),
            workload("h1", "a", 3, priority=5, created=10),
            workload("h1b", "a", 3, priority=5, created=20),
            workload("h2", "a", 4, priority=4, created=5),
            workload("h3", "a", 1, priority=3, created=5),
            workload("h4", "a", 3, priority=2, created=5),
        ],
    )


def _decide(parsed: Any, memo: bool) -> tuple[dict[str, Any], dict[str, int], dict[str, int | str]]:
    registry = Registry(
        [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), ("min-runtime", min_runtime, None)]
    )
    counters: dict[str, int | str] = {}
    decisions = run_session(snapshot(parsed, 100_000), registry, counters=counters, memo=memo)
    return json.loads(decisions.to_json()), dict(registry.vetoes), counters


def test_a_failed_search_answers_the_weaker_heads_of_its_queue_asking_no_less() -> None:
    """SEMANTICS §4 by hand: ``h1`` may take only ``low`` (1 core) and needs 3: no set
    frees enough. ``h1b`` (same priority, newer: the same candidates) and ``h2`` (lower
    priority, 4 cores) fail with it, and are answered by it without a search. ``h3``
    asks for less (1 core): searched, it takes ``low``. Choosing a victim moves the
    state, but ``h1``'s failure lasts: queue a may only borrow (``borrowWithinCohort:
    Never``, and it is full) and has no advantage at the root (full too), so
    ``cohort-reclaim`` offers it nothing, now or after any commit, and its own candidates
    only lose the victims chosen. ``h4`` (priority 2, 3 cores: no stronger, asking no
    less) is answered by it too; searched, it would find nothing below it but ``low``,
    taken."""
    decided, vetoes, counters = _decide(_dominance_cluster(protect_low=False), memo=True)
    pending = {entry["workload"]: entry for entry in decided["pending"]}
    assert [p["workload"] for p in decided["preempted"]] == ["ns/low"]
    assert decided["preempted"][0]["preemptor"] == "ns/h3"
    assert pending["ns/h3"]["reason"] == "PendingPreemption"
    for name in ("h1", "h1b", "h2", "h4"):
        assert pending[f"ns/{name}"]["reason"] == "PreemptionNoCandidates"
    judged = " (judged with ns/h1: no lower priority, asking for no more)"
    assert pending["ns/h1"]["message"] == NO_SET
    assert pending["ns/h1b"]["message"] == NO_SET + judged
    assert pending["ns/h2"]["message"] == NO_SET + judged
    assert pending["ns/h4"]["message"] == NO_SET + judged
    assert counters["searches-dominated"] == 3
    assert counters["victim-searches"] == 2  # h1, h3
    assert vetoes == {}
    plain, _, plain_counts = _decide(_dominance_cluster(protect_low=False), memo=False)
    assert assert_same_decisions(json.dumps(decided), json.dumps(plain)) == 3
    assert plain_counts["victim-searches"] == 5  # one per head


def test_a_failure_of_a_queue_that_may_reclaim_while_borrowing_answers_only_in_its_state() -> None:
    """The same queue with ``borrowWithinCohort: LowerPriority``: ``cohort-reclaim`` would
    offer it a sibling's workloads below its priority once the sibling is above its
    nominal (it has none here, but a failure does not last on what the tree holds), so
    ``h1``'s failure answers only while the state stands: ``h1b`` and ``h2`` are answered
    by it, ``h4``, after ``h3`` chose ``low``, is searched again and fails."""
    parsed = _dominance_cluster(protect_low=False, borrow_within_cohort="LowerPriority")
    decided, _, counters = _decide(parsed, memo=True)
    pending = {entry["workload"]: entry for entry in decided["pending"]}
    assert decided["preempted"][0]["preemptor"] == "ns/h3"
    judged = " (judged with ns/h1: no lower priority, asking for no more)"
    assert pending["ns/h2"]["message"] == NO_SET + judged
    assert pending["ns/h4"]["reason"] == "PreemptionNoCandidates"
    assert pending["ns/h4"]["message"] == NO_SET
    assert counters["searches-dominated"] == 2
    assert counters["victim-searches"] == 3  # h1, h3, h4
    plain, _, _ = _decide(parsed, memo=False)
    assert assert_same_decisions(json.dumps(decided), json.dumps(plain)) == 2


def test_a_failed_search_with_a_veto_answers_nobody() -> None:
    """With ``low`` protected by min-runtime, ``h1``'s search has a veto: it answers no
    other head, each of which is searched and vetoed in turn (reason ``MinRuntime``,
    SEMANTICS §5), exactly as on the plain path."""
    decided, vetoes, counters = _decide(_dominance_cluster(protect_low=True), memo=True)
    plain, plain_vetoes, _ = _decide(_dominance_cluster(protect_low=True), memo=False)
    assert decided == plain
    assert vetoes == plain_vetoes == {"min-runtime": 5}
    assert counters["searches-dominated"] == 0
    assert {entry["reason"] for entry in decided["pending"]} == {"MinRuntime"}


def test_a_victim_chosen_in_another_queue_tree_keeps_a_failed_search_answering() -> None:
    """Two queue trees. In ``a``'s tree ``h1`` (3 cores) may take only ``low`` (1 core):
    no set frees enough. In the same round ``b1``, in ``b``'s own tree, takes ``b-low``.
    ``b-low`` was never a candidate in ``a``'s tree, so in the next round ``h2`` (lower
    priority, 4 cores) is still answered by ``h1``'s failed search."""
    policy = PreemptionPolicy(within_queue="LowerPriority", reclaim_within_cohort="Any")
    parsed = inventory(
        [
            cohort("ra"),
            cohort("rb"),
            queue("a", "ra", cpu=4, preemption=policy),
            queue("b", "rb", cpu=2, preemption=policy),
        ],
        [
            workload("low", "a", 1, priority=1, created=1, admitted=True),
            workload("top", "a", 3, priority=9, created=2, admitted=True),
            workload("h1", "a", 3, priority=5, created=10),
            workload("h2", "a", 4, priority=4, created=10),
            workload("b-low", "b", 2, priority=0, created=1, admitted=True),
            workload("b1", "b", 2, priority=5, created=10),
        ],
    )
    decided, _, counters = _decide(parsed, memo=True)
    assert [(p["workload"], p["preemptor"]) for p in decided["preempted"]] == [("ns/b-low", "ns/b1")]
    pending = {entry["workload"]: entry for entry in decided["pending"]}
    assert pending["ns/h1"]["message"] == NO_SET
    assert pending["ns/h2"]["message"] == NO_SET + " (judged with ns/h1: no lower priority, asking for no more)"
    assert counters["searches-dominated"] == 1
    plain, _, _ = _decide(parsed, memo=False)
    assert assert_same_decisions(json.dumps(decided), json.dumps(plain), parsed.workloads) == 1


def test_a_head_with_the_same_pod_sets_as_a_failed_one_is_judged_without_a_scan() -> None:
    """In the cluster of the dominance test, ``h1b`` has exactly ``h1``'s pod sets, the same
    priority and a later creation time: its flavor scan would see what ``h1``'s saw and each
    of its searches would be answered by ``h1``'s failure, so it takes ``h1``'s assignment
    without a scan, its message naming ``h1``. ``h2`` (4 cores) has other pod sets: it is
    scanned, and only its search is answered by ``h1``'s. So is ``h4``'s, scanned because
    ``h3``'s victim moved the state (a kept head judges only in its own state), answered
    by ``h1``'s failure, which lasts (see the dominance test). Decisions are the plain
    path's."""
    decided, _, counters = _decide(_dominance_cluster(protect_low=False), memo=True)
    assert counters["heads-judged"] == 1
    assert counters["flavors-scanned"] == 4  # h1, h2, h3, h4: not h1b
    pending = {entry["workload"]: entry for entry in decided["pending"]}
    judged = " (judged with ns/h1: no lower priority, asking for no more)"
    assert pending["ns/h1b"] == {
        "workload": "ns/h1b",
        "reason": "PreemptionNoCandidates",
        "message": NO_SET + judged,
        "waitingFor": [],
        "positionInQueue": 2,
    }
    plain, _, plain_counts = _decide(_dominance_cluster(protect_low=False), memo=False)
    assert plain_counts["heads-judged"] == 0 and plain_counts["flavors-scanned"] == 5
    assert assert_same_decisions(json.dumps(decided), json.dumps(plain)) == 3


def test_a_head_whose_nomination_met_a_veto_judges_nobody() -> None:
    """With ``low`` protected, ``h1``'s search is vetoed by min-runtime: ``h1b`` is scanned
    and searched itself, and gets its own veto and note (SEMANTICS §5)."""
    decided, vetoes, counters = _decide(_dominance_cluster(protect_low=True), memo=True)
    assert counters["heads-judged"] == 0 and counters["flavors-scanned"] == 5
    plain, plain_vetoes, _ = _decide(_dominance_cluster(protect_low=True), memo=False)
    assert decided == plain and vetoes == plain_vetoes


def test_a_weaker_head_whose_walk_would_meet_a_veto_is_searched_itself() -> None:
    """A random cluster (seed 1311) where a stronger head's failed search never asked
    min-runtime about ``w3`` (its order and classes led elsewhere first) while the weaker
    ``w4``'s walk does, and min-runtime protects ``w3`` (reclaim window of queue q1,
    SEMANTICS §5). Plugins may refuse candidates in this session, so only a failure
    without any candidate (no plugin was asked) answers another: ``w4`` is searched and
    pending ``MinRuntime``, as on the plain path."""
    parsed = _random_cluster(1311)

    def registry() -> Registry:
        return Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None),
                         ("min-runtime", min_runtime, None)])

    (fast, fast_vetoes, counts), (plain, plain_vetoes, _) = _both(
        lambda: snapshot(parsed, 100_000), registry, ("allocate", "preempt")
    )
    assert fast_vetoes == plain_vetoes
    assert assert_same_decisions(fast, plain, parsed.workloads) == counts["searches-dominated"]
    pending = {entry["workload"]: entry for entry in json.loads(fast)["pending"]}
    for entry in pending.values():
        if JUDGED.search(entry["message"]) is not None:
            assert entry["message"].startswith(NO_CANDIDATE)
    assert pending["ns/w4"]["reason"] == "MinRuntime"

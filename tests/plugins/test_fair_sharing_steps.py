"""Fair sharing over stepped sessions (SEMANTICS §7, CONTRACT §3 ``--apply``): no
preemption loops, and decisions independent of runs and document order.

Clusters are generated: one tree (a root with quota, one or two cohorts of leaves
below it, or leaves directly under it), leaf quotas, weights (0 included),
``reclaimWithinCohort`` and ``withinQueue`` policies, admitted and pending 1-3 cpu
workloads of a few priorities. Each step runs one session with ``--apply``; a
victim that was evicted is then gone from the cluster and comes back as a pending
workload (requeued, as Kueue requeues an evicted workload), the clock moves on, and
the next session runs on the result.

Every strategy list is stepped, the default one (both passes) most often.
``LessThanInitialShare`` takes a victim whatever the target's share becomes; the nominal
floor (search.py, docs/fair-sharing.md) keeps it from leaving the victim's queue below
nominal, from where the victim would take its place straight back.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from preemptd.daemon.cli import main

CONFIG = "[plugins.fair-sharing]\nenabled = true\n"
FINAL_ONLY = CONFIG + 'preemption_strategies = ["LessThanOrEqualToFinalShare"]\n'
INITIAL_ONLY = CONFIG + 'preemption_strategies = ["LessThanInitialShare"]\n'
FLAVOR = {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "default"}}


def _queue(name: str, parent: str | None, cpu: int | None, spec: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = dict(spec)
    if parent is not None:
        body["parent"] = parent
    if cpu is not None:
        body["resourceGroups"] = [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": str(cpu)}]}],
            }
        ]
    return {"apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": name}, "spec": body}


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [FLAVOR, _queue("root", None, draw(st.integers(0, 4)), {})]
    cohorts = draw(st.sampled_from([[], ["left"], ["left", "right"]]))
    for cohort in cohorts:
        weight = draw(st.sampled_from(["1", "2", "0.5", "0"]))
        objects.append(_queue(cohort, "root", None, {"fairSharing": {"weight": weight}}))
    parents = cohorts or ["root"]
    leaves = [f"q{i}" for i in range(draw(st.integers(2, 4)))]
    for i, leaf in enumerate(leaves):
        spec = {
            "preemption": {
                "reclaimWithinCohort": draw(st.sampled_from(["Any", "LowerPriority", "Never"])),
                "withinQueue": draw(st.sampled_from(["LowerPriority", "Never"])),
            },
            "fairSharing": {"weight": draw(st.sampled_from(["1", "1", "2", "0.5", "0"]))},
        }
        objects.append(_queue(leaf, parents[i % len(parents)], draw(st.integers(0, 4)), spec))
    for n in range(draw(st.integers(1, 10))):
        queue = draw(st.sampled_from(leaves))
        pod_set = {"name": "main", "count": 1, "requests": {"cpu": str(draw(st.integers(1, 3)))}}
        workload: dict[str, Any] = {
            "apiVersion": "preemptd.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": f"w{n}", "namespace": "ml", "creationTimestamp": f"2026-01-01T00:{n:02d}:00Z"},
            "spec": {"queueName": queue, "priority": draw(st.integers(0, 2)), "podSets": [pod_set]},
        }
        if draw(st.booleans()):
            workload["status"] = {
                "admission": {"queue": queue, "podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "default"}}]},
                "admittedAt": f"2026-01-01T00:{n + 10:02d}:00Z",
            }
        objects.append(workload)
    return objects


def _workload(
    name: str, queue: str, cpu: int, minute: int, admitted: int | None = None, priority: int = 0
) -> dict[str, Any]:
    pod_set = {"name": "main", "count": 1, "requests": {"cpu": str(cpu)}}
    workload: dict[str, Any] = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": f"2026-01-01T00:{minute:02d}:00Z"},
        "spec": {"queueName": queue, "priority": priority, "podSets": [pod_set]},
    }
    if admitted is not None:
        workload["status"] = {
            "admission": {"queue": queue, "podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "default"}}]},
            "admittedAt": f"2026-01-01T00:{admitted:02d}:00Z",
        }
    return workload


POLICY = {"preemption": {"reclaimWithinCohort": "Any", "withinQueue": "LowerPriority"}}
# The second pass would take c2 after c1 from a, leaving it at 1 of its nominal 2; c1 and c2
# would come back ahead of w (scenario cases fair_loop_*: flat, without the floor).
FLAT_LOOP = [
    FLAVOR,
    _queue("a", "cohort", 2, POLICY),
    _queue("b", "cohort", 2, {**POLICY, "fairSharing": {"weight": "2"}}),
    _workload("x", "a", 1, 0, admitted=10),
    _workload("c1", "a", 1, 1, admitted=12),
    _workload("c2", "a", 2, 2, admitted=11),
    _workload("w", "b", 3, 20),
]
# Found by the generator: q0 within nominal reclaims w6, borrows on with w2 and w3, then
# the second pass takes w1 and w2 for w6, leaving q0 at 3 of its nominal 4.
TREE_LOOP = [
    FLAVOR,
    _queue("root", None, 2, {}),
    _queue("left", "root", None, {"fairSharing": {"weight": "0"}}),
    _queue("right", "root", None, {}),
    _queue("q0", "left", 4, POLICY),
    _queue("q1", "right", 0, POLICY),
    _workload("w0", "q0", 1, 0),
    _workload("w1", "q0", 2, 1),
    *(_workload(f"w{n}", "q0", 1, n) for n in (2, 3, 4)),
    _workload("w5", "q0", 1, 5, admitted=15),
    _workload("w6", "q1", 3, 6, admitted=16),
]


# Found by the generator: two reclaims in opposite directions, three sessions apart.
RECLAIMED_BACK = [
    FLAVOR,
    _queue("root", None, 0, {}),
    _queue("left", "root", None, {"fairSharing": {"weight": "1"}}),
    _queue("q0", "left", 2, POLICY),
    _queue("q1", "left", 3, POLICY),
    *(
        _workload(name, queue, cpu, minute, admitted, priority)
        for name, queue, cpu, minute, admitted, priority in (
            ("w0", "q0", 1, 0, None, 0),
            ("w1", "q0", 1, 1, None, 0),
            ("w2", "q0", 3, 2, 12, 0),
            ("w3", "q1", 1, 3, None, 0),
            ("w4", "q1", 2, 4, None, 1),
            ("w5", "q0", 3, 5, 15, 1),
            ("w6", "q0", 2, 6, 16, 1),
            ("w7", "q0", 3, 7, 17, 0),
            ("w8", "q1", 1, 8, None, 0),
        )
    ),
]


# docs/fair-sharing.md, "What the floor does not cover": p's victim v takes the room back
# while q0's head is h, and p takes it from v again a session later.
PREEMPTOR_BEHIND_HEAD = [
    FLAVOR,
    _queue("root", None, 2, {}),
    _queue("left", "root", None, {}),
    _queue("right", "root", None, {}),
    _queue("q0", "left", 0, POLICY),
    _queue("q1", "right", 3, POLICY),
    _workload("u", "q1", 3, 0, admitted=10, priority=2),
    _workload("v", "q1", 2, 1, admitted=11),
    _workload("h", "q0", 3, 2, priority=1),
    _workload("p", "q0", 1, 3),
]

# Found by the generator: w9 takes w0's place in session 0 but q1's head is then w1, so w9
# runs only from session 3; in session 4 w0 takes w9's place by LessThanInitialShare, and
# from there on PREEMPTOR_BEHIND_HEAD's pattern (q0's head is w7).
FAIR_BEHIND_HEAD = [
    FLAVOR,
    _queue("root", None, 2, {}),
    _queue("left", "root", None, {"fairSharing": {"weight": "0.5"}}),
    _queue("right", "root", None, {"fairSharing": {"weight": "0.5"}}),
    _queue("q0", "left", 0, {**POLICY, "fairSharing": {"weight": "1"}}),
    _queue("q1", "right", 3, {**POLICY, "fairSharing": {"weight": "1"}}),
    *(
        _workload(name, queue, cpu, minute, admitted, priority)
        for name, queue, cpu, minute, admitted, priority in (
            ("w0", "q0", 1, 0, 10, 0),
            ("w1", "q1", 3, 1, None, 2),
            ("w2", "q1", 1, 2, 12, 0),
            ("w3", "q0", 2, 3, None, 0),
            ("w4", "q0", 2, 4, None, 0),
            ("w5", "q0", 3, 5, 15, 0),
            ("w6", "q1", 3, 6, 16, 0),
            ("w7", "q0", 3, 7, 17, 1),
            ("w8", "q0", 2, 8, None, 1),
            ("w9", "q1", 2, 9, None, 1),
        )
    ),
]


def _cycle(
    objects: list[dict[str, Any]], now: str, tmp: Path, capsys: pytest.CaptureFixture[str], config_text: str = CONFIG
) -> tuple[str, list[dict[str, Any]]]:
    snapshot = tmp / "in.yaml"
    snapshot.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    config = tmp / "preemptd.toml"
    config.write_text(config_text, encoding="utf-8")
    out = tmp / "out.yaml"
    argv = ["cycle", str(snapshot), "--config", str(config), "--output", "json", "--now", now, "--apply", str(out)]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    applied = [doc for doc in yaml.safe_load_all(out.read_text(encoding="utf-8")) if doc is not None]
    return captured.out, applied


def _queue_heads(objects: list[dict[str, Any]]) -> set[str]:
    """Each queue's first pending workload (``namespace/name``): higher priority, then older
    ``creationTimestamp``, then the tie-break key (SEMANTICS §2.1)."""
    first: dict[str, tuple[tuple[int, str, str, str, str], str]] = {}
    for obj in objects:
        if obj.get("kind") != "Workload" or obj.get("status", {}).get("admission"):
            continue
        meta = obj["metadata"]
        rank = (-obj["spec"].get("priority", 0), meta["creationTimestamp"], meta.get("uid", ""), meta["namespace"], meta["name"])
        queue = obj["spec"]["queueName"]
        if queue not in first or rank < first[queue][0]:
            first[queue] = (rank, f"{meta['namespace']}/{meta['name']}")
    return {key for _, key in first.values()}


def _requeue_evicted(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Evicted workloads are gone from their queue's usage and pending again."""
    out = []
    for obj in objects:
        conditions = obj.get("status", {}).get("conditions", []) if obj.get("kind") == "Workload" else []
        if any(c.get("type") == "Evicted" and c.get("status") == "True" for c in conditions):
            obj = {key: value for key, value in obj.items() if key != "status"}
        out.append(obj)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(objects=clusters(), config=st.sampled_from([CONFIG, CONFIG, FINAL_ONLY, INITIAL_ONLY]))
@example(objects=TREE_LOOP, config=CONFIG)
@example(objects=RECLAIMED_BACK, config=FINAL_ONLY)
@example(objects=FAIR_BEHIND_HEAD, config=CONFIG)
def test_stepped_sessions_never_preempt_back_and_forth(
    objects: list[dict[str, Any]], config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workload preempted for a preemptor that went on to take its place is never
    preempted in turn for that workload: after p took v's place, v never takes p's —
    unless both were reclaims (``InCohortReclamation``): a queue within its nominal taking
    back quota from one that borrows it, which can turn round only after the other queue
    borrows again (RECLAIMED_BACK).

    p takes v's place in the session after the preemption only if p is then its queue's
    first pending workload (SEMANTICS §2.1). When another workload of p's queue comes
    first, the room v left can go to v again before p is offered (docs/fair-sharing.md,
    "What the floor does not cover"; PREEMPTOR_BEHIND_HEAD), and the preemption is not
    counted as p taking v's place."""
    taken: dict[tuple[str, str], str] = {}  # (victim, preemptor) over all sessions so far: the reason
    chosen: dict[tuple[str, str], str] = {}  # the last session's, until the next one's heads are known
    for step in range(5):
        heads = _queue_heads(objects)
        taken.update((pair, reason) for pair, reason in chosen.items() if pair[1] in heads)
        raw, applied = _cycle(objects, f"2026-01-01T01:{step:02d}:00Z", tmp_path, capsys, config)
        decisions = json.loads(raw)
        chosen = {}
        for victim in decisions["preempted"]:
            pair = (victim["workload"], victim["preemptor"])
            reason = victim["reason"]
            before = taken.get((pair[1], pair[0]))
            reclaimed_back = before == reason == "InCohortReclamation"
            assert before is None or reclaimed_back, f"step {step}: {pair[0]} preempted for {pair[1]}, its own victim"
            chosen[pair] = reason
        objects = _requeue_evicted(applied)


def test_a_reclaim_turns_round_only_after_the_reclaimed_queue_borrows_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """RECLAIMED_BACK stepped with the final-share strategy alone (SEMANTICS §2 steps 4-5,
    §3): q1 (nominal 3) reclaims from q0 (11 cpu admitted, nominal 2) and w6 makes room for
    w4; two sessions on, q1 admits w3 within nominal and w8 by borrowing in the rounds
    where q0's head w5 no longer fits and then finds no victims, so q0's next head w6,
    within q0's nominal, reclaims from q1, whose only running workload is w4."""
    objects = RECLAIMED_BACK
    reclaims = []
    for step in range(4):
        raw, applied = _cycle(objects, f"2026-01-01T01:{step:02d}:00Z", tmp_path, capsys, FINAL_ONLY)
        decisions = json.loads(raw)
        reclaims.append({(v["workload"], v["preemptor"], v["reason"]) for v in decisions["preempted"]})
        admitted = {a["workload"]: a["borrowing"] for a in decisions["admitted"]}
        objects = _requeue_evicted(applied)
    assert ("ml/w6", "ml/w4", "InCohortReclamation") in reclaims[0]
    assert admitted == {"ml/w3": False, "ml/w8": True}  # the last session's
    assert reclaims[3] == {("ml/w4", "ml/w6", "InCohortReclamation")}


def test_fair_victims_left_within_nominal_do_not_come_back_before_their_preemptor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FLAT_LOOP stepped with the default strategies: the second pass may not leave a at 1
    of its nominal 2, so w takes nothing, and the sessions settle at once; c1 and c2 are
    never evicted, admitted back ahead of w (a within nominal goes first) and evicted again."""
    objects = FLAT_LOOP
    for step in range(3):
        raw, applied = _cycle(objects, f"2026-01-01T01:{step:02d}:00Z", tmp_path, capsys)
        decisions = json.loads(raw)
        assert decisions["preempted"] == [], f"step {step}: {decisions['preempted']}"
        assert [p["reason"] for p in decisions["pending"]] == ["PreemptionNoCandidates"]
        objects = _requeue_evicted(applied)


def test_a_preemptor_behind_its_queue_head_loses_the_room_to_its_victim_every_other_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PREEMPTOR_BEHIND_HEAD stepped with the default strategies (SEMANTICS §7, by hand:
    subtree quotas left 0, right 3, root 5; shares over the root's 5 cpu).

    Odd sessions: h (3 cpu, priority 1) comes first in q0 and finds no victims (left with
    h 600 is above right 400); then p (1 cpu) takes v in pass 2 (200 < 400; q1 goes from 5
    to its nominal 3, which the floor allows). Even sessions: v, requeued, fits in the 2 cpu
    it left and wins the tournament against h (right with v 400 before left with h 600);
    then p finds only u, which the floor keeps (q1 would go from 5 to 2, below 3), and v,
    which the session admitted itself. So v is evicted every other session and p never runs,
    as Kueue's one head per cycle would do."""
    objects = PREEMPTOR_BEHIND_HEAD
    for step in range(4):
        raw, applied = _cycle(objects, f"2026-01-01T01:{step:02d}:00Z", tmp_path, capsys)
        decisions = json.loads(raw)
        preempted = [(v["workload"], v["preemptor"], v["reason"]) for v in decisions["preempted"]]
        admitted = [(a["workload"], a["borrowing"]) for a in decisions["admitted"]]
        pending = {p["workload"]: p["reason"] for p in decisions["pending"]}
        if step % 2 == 0:
            assert preempted == [("ml/v", "ml/p", "InCohortFairSharing")], f"step {step}"
            assert admitted == []
            assert pending == {"ml/h": "PreemptionNoCandidates", "ml/p": "PendingPreemption"}
        else:
            assert preempted == [], f"step {step}"
            assert admitted == [("ml/v", True)]
            assert pending == {"ml/h": "PreemptionNoCandidates", "ml/p": "PreemptionNoCandidates"}
        objects = _requeue_evicted(applied)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(objects=clusters(), seed=st.integers(0, 2**32 - 1))
def test_fair_decisions_are_identical_across_runs_and_document_orders(
    objects: list[dict[str, Any]], seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same objects in another order, decided again, give byte-identical JSON."""
    first, _ = _cycle(objects, "2026-01-01T01:00:00Z", tmp_path, capsys)
    again, _ = _cycle(objects, "2026-01-01T01:00:00Z", tmp_path, capsys)
    shuffled = list(objects)
    random.Random(seed).shuffle(shuffled)
    other, _ = _cycle(shuffled, "2026-01-01T01:00:00Z", tmp_path, capsys)
    assert '"shares"' in first
    assert first == again == other

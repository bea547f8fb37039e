"""The whole request of a workload with several podSets repeats its podSet's walk.

Queue ``a`` lists flavors ``x`` (4 cores) and ``y`` (10 cores, full: ``low`` 4, ``low2`` 4
and ``guarded`` 2, all of priority 0). ``high`` (priority 5) asks for a launcher of 1 core
and a main podSet of 8 cores. The scan puts the launcher on ``x`` (it fits) and the main
podSet on ``y`` (8 cores exceed ``x``'s 4), where its search asks about ``guarded`` first
(the newest), which a plugin refuses, and takes ``low2`` and ``low``.

The whole request asks for what the main podSet's search asked plus the launcher's core
of ``x``. When that core fits the queue's nominal, the plugins offer the whole request the
very candidates they offered the podSet, and its walk would be the same step for step:
its answer is the podSet search's, the veto counted again, without a second walk. When
the launcher's core makes the queue borrow, an attempt within nominal could fail where
the podSet's succeeded, and the level differ: the whole request is walked again. Either way the memo path
decides, explains and counts vetoes as the plain path, which walks every search; so it
does on random clusters of two flavors whose workloads have two podSets, with min-runtime
refusing candidates.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework import CLASS_SAME_QUEUE, IN_QUEUE, candidate_units, hookimpl
from preemptd.framework.model import (
    Admission,
    FlavorQuotas,
    PodSet,
    PodSetAdmission,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from preemptd.framework.preemption.walk import Walk
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.testing import cohort, inventory, snapshot
from preemptd.plugins import cohort_reclaim, flavor_fungibility, min_runtime, priority

_NOW = 100_000
_JUDGED = re.compile(r" \(judged with [^:]+: no lower priority, asking for no more\)")
_NO_SET = "no set of preemptible victims frees enough room"
_NO_CANDIDATE = "no running workload that uses the needed quota may be preempted"


class _Veto:
    MEMO_SAFE = True

    @staticmethod
    @hookimpl
    def is_preemptible(session: Any, action: str, preemptor: Any, preemptee: Any) -> bool | None:
        return False if preemptee.workload.key.endswith("/guarded") else None


def _admitted(name: str, cpu: int, created: int) -> Workload:
    admission = Admission("a", (PodSetAdmission("main", 1, {"cpu": "y"}),))
    pod_set = PodSet("main", 1, {"cpu": cpu * 1000})
    return Workload("ns", name, "a", (pod_set,), created=created, admission=admission, admitted_at=created)


def _cluster(x_nominal: int) -> Any:
    def quota(cores: int) -> dict[str, ResourceQuota]:
        return {"cpu": ResourceQuota(cores * 1000, None, None)}

    flavors = (FlavorQuotas("x", quota(x_nominal)), FlavorQuotas("y", quota(10)))
    queues = [
        cohort("root"),
        QueueSpec(
            "a",
            "root",
            (ResourceGroup(("cpu",), flavors),),
            preemption=PreemptionPolicy(within_queue="LowerPriority"),
        ),
    ]
    if x_nominal < 1:
        # A lender of x: the launcher's core then borrows.
        lender = (FlavorQuotas("x", quota(4)),)
        queues.append(QueueSpec("b", "root", (ResourceGroup(("cpu",), lender),)))
    high = Workload(
        "ns",
        "high",
        "a",
        (PodSet("launcher", 1, {"cpu": 1000}), PodSet("main", 1, {"cpu": 8000})),
        priority=5,
        created=10,
    )
    workloads = [_admitted("low", 4, 1), _admitted("low2", 4, 2), _admitted("guarded", 2, 3), high]
    return snapshot(inventory(queues, workloads, flavors=("x", "y")), _NOW)


def _decide(monkeypatch: pytest.MonkeyPatch, x_nominal: int, memo: bool) -> tuple[Any, int, int]:
    """The decisions (JSON and explanations), the veto count and how many walks ran."""
    attempts: list[int] = []
    real = Walk.attempt

    def counting(self: Walk, *args: Any, **kwargs: Any) -> Any:
        attempts.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Walk, "attempt", counting)
    registry = Registry(
        [("priority", priority, None), ("flavor-fungibility", flavor_fungibility, None), ("veto", _Veto(), None)]
    )
    decisions = run_session(_cluster(x_nominal), registry, memo=memo)
    monkeypatch.undo()
    return (decisions.to_json(), decisions.explanations), registry.vetoes["veto"], len(attempts)


def test_a_whole_request_adding_what_fits_takes_its_podsets_walk_without_walking_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast, fast_vetoes, fast_walks = _decide(monkeypatch, 4, memo=True)
    plain, plain_vetoes, plain_walks = _decide(monkeypatch, 4, memo=False)
    assert fast == plain
    decisions = fast[0]
    assert '"workload": "ns/low"' in decisions and '"workload": "ns/low2"' in decisions
    assert '"workload": "ns/guarded", "preemptor"' not in decisions
    # Asked about "guarded" by the main podSet's search and by the whole request's.
    assert fast_vetoes == plain_vetoes == 2
    # The plain path walks both searches; the memo path walks the podSet's only.
    assert (plain_walks, fast_walks) == (2, 1)


def test_a_whole_request_whose_added_flavor_borrows_is_walked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, fast_vetoes, fast_walks = _decide(monkeypatch, 0, memo=True)
    plain, plain_vetoes, plain_walks = _decide(monkeypatch, 0, memo=False)
    assert fast == plain
    assert fast_vetoes == plain_vetoes
    # The launcher's core of x borrows (a walk within nominal, or the level it measures,
    # could then differ from the podSet's): the whole request walks on its own.
    assert fast_walks == plain_walks == 2


def _random_cluster(seed: int) -> Any:
    """Two flavors of cpu, queues in two cohorts with random quotas, limits, policies and
    min-runtime windows; workloads of a launcher and a main podSet, some running."""
    rnd = random.Random(seed)
    queues = [cohort("root"), cohort("c1", "root"), cohort("c2", "root")]
    names = []
    for i in range(rnd.randint(2, 5)):
        name = f"q{i}"
        names.append(name)
        flavors = tuple(
            FlavorQuotas(
                flavor,
                {"cpu": ResourceQuota(rnd.randint(0, 8) * 1000, rnd.choice([None, 0, 2000, 5000]), None)},
            )
            for flavor in rnd.sample(["x", "y"], 2)
        )
        policy = PreemptionPolicy(
            within_queue=rnd.choice(["Never", "LowerPriority"]),
            reclaim_within_cohort=rnd.choice(["Never", "LowerPriority", "Any"]),
            borrow_within_cohort=rnd.choice(["Never", "LowerPriority"]),
        )
        queues.append(
            QueueSpec(
                name,
                rnd.choice(["c1", "c2"]),
                (ResourceGroup(("cpu",), flavors),),
                preemption=policy,
                preempt_min_runtime=rnd.choice([None, 30_000]),
                reclaim_min_runtime=rnd.choice([None, 60_000]),
            )
        )
    workloads = []
    for i in range(rnd.randint(1, 24)):
        queue_name = rnd.choice(names)
        pod_sets = (
            PodSet("launcher", 1, {"cpu": rnd.randint(1, 2) * 1000}),
            PodSet("main", 1, {"cpu": rnd.randint(1, 6) * 1000}),
        )
        admission = None
        if rnd.random() < 0.5:
            flavors = [rnd.choice(["x", "y"]) for _ in pod_sets]
            admission = Admission(
                queue_name, tuple(PodSetAdmission(ps.name, 1, {"cpu": f}) for ps, f in zip(pod_sets, flavors, strict=True)),
            )
        workloads.append(
            Workload(
                "ns", f"w{i}", queue_name, pod_sets, priority=rnd.randint(0, 3), created=rnd.randint(0, 50),
                admission=admission, admitted_at=rnd.randint(0, 100_000) if admission else None,
            )
        )
    return snapshot(inventory(queues, workloads, flavors=("x", "y")), _NOW)


@settings(max_examples=120, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
def test_random_two_flavor_clusters_decide_explain_and_veto_as_the_plain_path(seed: int) -> None:
    outputs = []
    for memo in (True, False):
        registry = Registry(
            [
                ("priority", priority, None),
                ("cohort-reclaim", cohort_reclaim, None),
                ("flavor-fungibility", flavor_fungibility, None),
                ("min-runtime", min_runtime, None),
            ]
        )
        decisions = run_session(_random_cluster(seed), registry, memo=memo)
        outputs.append((decisions.to_json(), decisions.explanations, dict(registry.vetoes)))
    fast, plain = outputs
    assert fast[2] == plain[2]  # vetoes
    # The one difference allowed (tests/scenarios/test_search_memo.py): a head whose search
    # a failed search of its queue answered names the head it was judged with, in its
    # pending message and explanation; that answer may say "no set" where its own search
    # found no candidate.
    fast_json, plain_json = json.loads(fast[0]), json.loads(plain[0])
    fast_messages = [entry.pop("message") for entry in fast_json["pending"]]
    plain_messages = [entry.pop("message") for entry in plain_json["pending"]]
    assert fast_json == plain_json
    assert all(map(_same_line, fast_messages, plain_messages))
    assert fast[1].keys() == plain[1].keys()
    for key, lines in fast[1].items():
        # A head judged with another (a failed search that dominates its own, or a failed
        # nomination of the same pod sets: preemption/heads.py) is explained as such on the
        # memo path: left aside.
        if not any(_JUDGED.search(line) or line.startswith("flavors as for ") for line in lines):
            assert lines == plain[1][key]


def _same_line(fast: str, plain: str) -> bool:
    if fast == plain:
        return True
    base = _JUDGED.sub("", fast)
    return base != fast and (base == plain or base.replace(_NO_SET, _NO_CANDIDATE) == plain)


class _OfferByFlavors:
    """Offers two of queue a's running workloads, which two depending on whether the
    request asks for flavor x too (a third-party rule the memo contract allows: the
    request is an input of ``preemption_candidates``)."""

    MEMO_SAFE = True

    @staticmethod
    @hookimpl
    def preemption_candidates(session: Any, preemptor: Any, assignment: Any) -> list[Any]:
        names = ("low", "guarded") if any(fr[0] == "x" for fr in assignment.usage) else ("low", "low2")
        out = []
        for name in names:
            running = session.snapshot.workloads[f"ns/{name}"]
            out.extend(
                candidate_units(session, running, assignment.leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
            )
        return out


def test_a_whole_request_offered_other_candidates_than_its_podset_is_walked_on_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As many candidates as the main podSet's search was offered, but not the same: the
    whole request ("low" and "guarded", 6 cores) cannot free the 8 cores the podSet's
    search freed with "low" and "low2"."""
    outputs = []
    for memo in (True, False):
        registry = Registry([("offer", _OfferByFlavors(), None), ("flavor-fungibility", flavor_fungibility, None)])
        decisions = run_session(_cluster(4), registry, memo=memo)
        outputs.append((decisions.to_json(), decisions.explanations))
    assert outputs[0] == outputs[1]
    decisions = json.loads(outputs[0][0])
    assert decisions["preempted"] == []
    (pending,) = decisions["pending"]
    assert pending["workload"] == "ns/high"
    assert pending["message"] == "no set of preemptible victims frees enough room"

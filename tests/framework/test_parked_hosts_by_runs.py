"""The nodes hosting a whole request's candidates, read run by run
(framework/preemption/parked.py ``_runs_hosts``).

When the candidates come in runs, the nodes their pods are on are the union of each
run's, gathered once per session per run and kept with the unions of the same runs. In a
session whose searches take victims (so the queues' lists are rebuilt and runs of the
same source come back with other ranges), every whole request the podSet's
search may answer is asked both ways: the nodes must be exactly those of its candidates,
gathered one by one. The benchmark's deep cluster of 5,000 workloads in 100 queues (GPU
workloads with a launcher) reaches runs read again from the session's store, unions of
several runs, and unions read again; the test checks that it does, or it would prove
nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from preemptd.framework.preemption import parked
from preemptd.framework.run import run_session
from preemptd.framework.session import Candidate, Runs, Session
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_shape


def test_the_hosts_of_runs_are_the_nodes_of_their_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {"asked": 0, "several": 0, "kept": 0, "united again": 0, "others": 0}
    real = parked._parked

    def checked(
        session: Session, spec: Any, flavor: str, gpus: int, candidates: list[Candidate], runs: Runs | None
    ) -> bool:
        if runs is not None:
            kept = dict(session.state.get(parked._HOSTS, {}))
            united = dict(session.state.get(parked._UNITED, {}))
            hosts = parked._runs_hosts(session, runs)
            plain = {held.node_name for candidate in candidates for held in candidate.room}
            assert hosts is not None and set(hosts) == plain
            assert all(told is parked._NOTHING for told in hosts.values())
            seen["asked"] += 1
            seen["several"] += len(runs.parts) > 1
            seen["kept"] += sum(
                (source, runs.needed, runs.with_room, first, last, items is None) in kept
                for source, first, last, items in runs.parts
            )
            seen["united again"] += len(runs.parts) > 1 and any(union is hosts for union in united.values())
            # Other unions of the same runs: each is its own runs' (the first with the last).
            if len(runs.parts) > 2:
                some = Runs(runs.needed, runs.with_room, [runs.parts[0], runs.parts[-1]])
                found = parked._runs_hosts(session, some)
                assert found is not None and set(found) == _nodes(some)
                seen["others"] += 1
        return real(session, spec, flavor, gpus, candidates, runs)

    monkeypatch.setattr(parked, "_parked", checked)
    actions, registry = default_session()
    run_session(snapshot(generate_shape("grow-deep-5000", 1), NOW_MS), registry(), actions=actions)
    assert seen["asked"] >= 10
    assert seen["several"] >= 1 and seen["kept"] >= 1 and seen["united again"] >= 1, seen
    assert seen["others"] >= 1


def _nodes(runs: Runs) -> set[str]:
    """The nodes of the candidates of ``runs``, as ``Runs`` defines them."""
    out: set[str] = set()
    for source, first, last, items in runs.parts:
        units = items if items is not None else source.using(runs.needed, runs.with_room)[0][first:last]
        out.update(held.node_name for unit in units for held in unit.room)
    return out

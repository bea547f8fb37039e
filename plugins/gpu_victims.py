"""Plugin ``gpu-victims``: the least disruptive victims for GPU Deployments (SEMANTICS §6).

For a Deployment preemptor it ranks victims by lifecycle class first
(force-deleting, terminating, surplus, normal): a pod already on its way out
costs at most a force delete and keeps the choice stable while victims move
through their lifecycle. Then pod priority, the preemptor's placement score
(hook ``placement_score``), newer ``creationTimestamp``, higher pod name.

Eligibility: for a Deployment preemptor a pod of equal or higher priority is
never a victim; and no preemption takes a Deployment's last committed replica
(a scenario filter, so surplus and terminating pods stay eligible). A session
whose snapshot holds no Deployment gets no filter: every victim would be accepted,
and the filter would otherwise read every search's accumulated victims at each step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import isfinite

from preemptd.framework import (
    NORMAL,
    Candidate,
    Descending,
    Scenario,
    Session,
    Workload,
    bad_answer,
    hookimpl,
)

MEMO_SAFE = True  # answers depend only on session state and the preemptor (framework/session/hooks.py)


NAME = "gpu-victims"


def _has_deployments(session: Session) -> bool:
    """Whether the snapshot holds a Deployment; asked once per session (session.state).
    The snapshot counts them once, or is handed the count by a backend that keeps it."""
    state = session.state
    deployments: bool | None = state.get(NAME)
    if deployments is None:
        deployments = state[NAME] = session.snapshot.has_deployments()
    return deployments


@hookimpl
def session_open(session: Session) -> None:
    session.state.pop(NAME, None)
    if not _has_deployments(session):
        session.never_vetoes(NAME)  # only a Deployment preemptor is ever refused a victim


@hookimpl
def is_preemptible(session: Session, action: str, preemptor: Workload, preemptee: Candidate) -> bool | None:
    if preemptor.is_deployment and preemptee.priority >= preemptor.priority:
        return False
    return None


@hookimpl
def victim_order(session: Session, preemptor: Workload) -> Callable[[Candidate], Sequence[object]] | None:
    if not preemptor.is_deployment:
        return None
    scorers = session.registry.call_all("placement_score", session=session, preemptor=preemptor)

    def score(candidate: Candidate) -> float:
        # A scorer's failure (a raise, or not a finite number) is its plugin's, not
        # this one's: the placement then scores 0 for it.
        total = 0.0
        for name, scorer in scorers:
            try:
                value = scorer(candidate)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                session.registry.record_failure(name, "placement_score", exc)
                continue
            if (type(value) is float or type(value) is int) and isfinite(value):
                total += value
                continue
            session.registry.record_failure(
                name, "placement_score", bad_answer(value, "a finite number")
            )
        return total

    def key(candidate: Candidate) -> Sequence[object]:
        pods = candidate.pods
        return (
            candidate.pod_class,
            candidate.priority,
            score(candidate) if scorers else 0.0,
            -candidate.created,
            Descending(pods[0].key if pods else candidate.workload.key),
        )

    if not scorers:
        key.preemptor_independent = True  # type: ignore[attr-defined]
    return key


def _keeps_one_replica(scenario: Scenario) -> bool:
    taking: dict[str, int] = {}
    for victim in scenario.victims:
        if victim.count is not None and victim.pod_class == NORMAL and victim.workload.is_deployment:
            taking[victim.key] = taking.get(victim.key, 0) + victim.count
    if not taking:
        return True
    session = scenario.session
    for key, count in taking.items():
        workload = session.snapshot.workloads[key]
        assert workload.admission is not None
        committed = workload.admission.pod_sets[0].count
        earlier = session.taken.get(key)
        if committed - count - (earlier.pods if earlier is not None else 0) < 1:
            return False
    return True


@hookimpl
def get_accumulated_scenario_filters(
    session: Session, action: str, preemptor: Workload
) -> list[Callable[[Scenario], bool]]:
    # Victims are units of the snapshot's workloads: without a Deployment among them
    # the filter accepts every scenario.
    return [_keeps_one_replica] if _has_deployments(session) else []

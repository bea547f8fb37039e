"""A workload's units again after the session took from it (the candidate index's patches).

When the session takes from a workload it drops the workload's units
(``session.unit_cache``), and the candidate index patches every list of its queue by making
that workload's units again (``unitindex._patch``). Most of them were one whole unit: a
workload that is not elastic and not a Deployment giving pods, now taken whole. Its units
are then one whole unit again, with only ``evicted`` changed; its node room and unit name
are read from the snapshot alone (``units._room``: the pods and pods placed at session start
of the workload, never what the session took), so they are the ones the unit the list held
carries, and the workload's pods, scattered in memory, are not read again. Any other
workload's units are :func:`.units.candidate_units`' own.
"""

from __future__ import annotations

from ..model import Workload
from ..quota import QuotaNode
from ..session import Candidate, Session
from .units import _cached_units, _elastic_pod_set, _whole

__all__ = ["retaken_units"]


def retaken_units(
    session: Session,
    workload: Workload,
    leaf: QuotaNode,
    reason: str,
    group: int,
    only_within_nominal: bool,
    before: list[Candidate],
) -> list[Candidate]:
    """``candidate_units`` of ``workload`` (not deferred) of one class, given its units of
    that class in the list before the take (``before``)."""
    key = workload.key
    taken = session.taken.get(key)
    unit_cache = session.unit_cache
    if taken is None or len(before) != 1 or key in unit_cache:
        return _cached_units(session, workload, leaf, reason, group, only_within_nominal)
    unit = before[0]
    evicted = workload.evicted or taken.whole
    # Whole in ``_units``: evicted, not admitted, or neither a Deployment nor elastic.
    whole = evicted or workload.admission is None or (not workload.is_deployment and _elastic_pod_set(workload) is None)
    if not whole or type(unit) is not Candidate or unit.count is not None or unit.pod_set is not None:
        return _cached_units(session, workload, leaf, reason, group, only_within_nominal)
    usage = session.snapshot.usage.get(key, {})
    made = [_whole(workload, leaf, usage, reason, group, unit.room, unit.unit, only_within_nominal, evicted, session.now)]
    unit_cache[key] = {(leaf.index, reason, group, only_within_nominal, False): made}
    return made

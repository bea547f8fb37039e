"""Plugin ``fair-sharing``: dominant-resource fair sharing over the queue tree (SEMANTICS §7).

Off unless ``[plugins.fair-sharing] enabled = true``. It answers the three policy
hooks the framework keeps for this purpose, and changes nothing else:

* ``round_order`` — the tournament of §7.2 (:mod:`.order`) picks each next entry
  of a round on the shares as the entries before it left them;
* ``may_search_victims`` — §7.3: a request above nominal also asks for victims
  when the queue's ``reclaimWithinCohort`` is not ``Never``;
* ``victim_strategy`` — the fair victim search of §7.4 (:mod:`.search`), with the
  configured ``preemption_strategies`` and the nominal floor (``protect_nominal``,
  docs/fair-sharing.md) that keeps it free of preemption loops;

and at ``session_close`` it reports every queue's share on the usage held once the
decisions are committed (§7.6). Shares are exact (:mod:`.shares`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from preemptd.framework import (
    FR,
    Accounting,
    QueueShare,
    QuotaNode,
    Session,
    VictimWalk,
    Workload,
    hookimpl,
)

from .order import Tournament
from .search import FINAL, INITIAL, FairSearch
from .shares import Shares, reported

NAME = "fair-sharing"
# The fair victim search reads only the preemptor's request, the accounting of its
# queue tree, the victims chosen so far and the snapshot: a remembered search is
# exact (hooks.py, SEARCH_HOOKS).
MEMO_SAFE = True
_STRATEGIES = ((FINAL, INITIAL), (FINAL,), (INITIAL,))


@dataclass(frozen=True, slots=True)
class Config:
    """The table ``[plugins.fair-sharing]`` (CONTRACT §4)."""

    preemption_strategies: tuple[str, ...] = (FINAL, INITIAL)
    # The nominal floor (search.py, docs/fair-sharing.md): a fair-sharing victim never
    # brings its queue below nominal. ``false`` is SEMANTICS §7.4 as written (Kueue's rule).
    protect_nominal: bool = True

    def __post_init__(self) -> None:
        if tuple(self.preemption_strategies) not in _STRATEGIES:
            allowed = " or ".join(str(list(s)) for s in _STRATEGIES)
            raise ValueError(
                f"preemption_strategies: {list(self.preemption_strategies)} is not one of {allowed}"
            )


def _config(session: Session) -> Config:
    config = session.plugin_config(NAME)
    return config if isinstance(config, Config) else Config()


def _shares(session: Session) -> Shares:
    found = session.state.get(NAME)
    if not isinstance(found, Shares) or found.accounting is not session.accounting:
        found = session.state[NAME] = Shares(session.accounting)
    return found


@hookimpl
def plugin_config_schema() -> type[Config]:
    return Config


@hookimpl
def session_open(session: Session) -> None:
    session.state[NAME] = Shares(session.accounting)


@hookimpl
def round_order(session: Session) -> Tournament:
    return Tournament(session, _shares(session))


@hookimpl
def may_search_victims(session: Session) -> object:
    def allowed(leaf: QuotaNode, fr: FR, request: int) -> bool:
        return leaf.spec.preemption.reclaim_within_cohort != "Never"

    return allowed


@hookimpl
def victim_strategy(session: Session) -> object:
    shares = _shares(session)
    config = _config(session)
    strategies = tuple(config.preemption_strategies)
    floor = config.protect_nominal

    def strategy(walk: VictimWalk) -> bool:
        return FairSearch(walk, shares, strategies, floor).run()

    return strategy


@hookimpl
def session_close(session: Session) -> None:
    accounting = committed_usage(session)
    shares = Shares(accounting)
    tree = session.snapshot.tree
    scheduled = {leaf.root.index for leaf in tree.leaves.values()}
    session.decisions.shares = [
        QueueShare(node.name, reported(shares.share(node)))
        for name, node in sorted(tree.nodes.items())
        if node.root.index in scheduled
    ]


def _usage(workload: Workload, counts: Mapping[str, int], flavors: Mapping[str, Mapping[str, str]]) -> dict[FR, int]:
    usage: dict[FR, int] = {}
    for spec in workload.pod_sets:
        count = counts.get(spec.name, 0)
        chosen = flavors.get(spec.name, {})
        for resource, amount in spec.requests.items():
            flavor = chosen.get(resource)
            if amount and count and flavor is not None:
                fr = (flavor, resource)
                usage[fr] = usage.get(fr, 0) + amount * count
    return usage


def committed_usage(session: Session) -> Accounting:
    """SEMANTICS §7.6: the snapshot's usage with the session's admissions (at their
    committed counts) and shrinks applied; whole victims keep their quota until gone,
    pending preemptors and reservations hold nothing."""
    snapshot = session.snapshot
    accounting = snapshot.accounting.copy()
    leaves = snapshot.tree.leaves
    for admitted in session.decisions.admitted:
        workload = snapshot.workloads[admitted.workload]
        leaf = leaves[admitted.queue]
        before = snapshot.usage.get(workload.key)
        if before is not None and workload.admission is not None:
            accounting.remove_all(leaves[workload.admission.queue], before)
        counts = {ps.name: ps.count for ps in admitted.pod_sets}
        flavors = {ps.name: ps.flavors for ps in admitted.pod_sets}
        accounting.add_all(leaf, _usage(workload, counts, flavors))
    for preempted in session.decisions.preempted:
        workload = snapshot.workloads[preempted.workload]
        admission = workload.admission
        if preempted.count is None or admission is None or admission.queue not in leaves:
            continue
        name = preempted.pod_set or workload.pod_sets[0].name
        flavors = {psa.name: psa.flavors for psa in admission.pod_sets}
        accounting.remove_all(leaves[admission.queue], _usage(workload, {name: preempted.count}, flavors))
    return accounting

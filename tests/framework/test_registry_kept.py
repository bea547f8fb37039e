"""What the registry works out once per set of plugins instead of at every session's open."""

from __future__ import annotations

from types import SimpleNamespace

from preemptd.framework.model import Workload
from preemptd.framework.session import Candidate, Registry, Session, hookimpl
from preemptd.plugins import cohort_reclaim, min_runtime, priority


@hookimpl
def is_preemptible(session: Session, action: str, preemptor: Workload, preemptee: Candidate) -> bool | None:
    return None


def test_whether_every_search_plugin_is_memo_safe_is_found_once_until_a_plugin_is_added(monkeypatch) -> None:
    """Asked at every open, the registry looks its plugins up once; adding one that
    answers a search hook without MEMO_SAFE is then seen at the next question."""
    registry = Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None),
                         ("min-runtime", min_runtime, None)])
    looked_up: list[str] = []
    plain = registry.pm.get_plugin

    def counting(name: str) -> object:
        looked_up.append(name)
        return plain(name)

    monkeypatch.setattr(registry.pm, "get_plugin", counting)
    answers = [registry.memo_unsafe() for _ in range(3)]
    first = len(looked_up)
    registry.add("third-party", SimpleNamespace(is_preemptible=is_preemptible))
    answers.append(registry.memo_unsafe())
    assert ["", "", "", "third-party"] == answers
    assert first > 0 and len(looked_up) > first
    assert sorted(set(looked_up[:first])) == ["cohort-reclaim", "min-runtime", "priority"]
    again = len(looked_up)
    registry.memo_unsafe()
    assert again == len(looked_up)

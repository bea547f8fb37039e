"""What the CLI prints for people: decision tables, the plugin list, explanations.

Machines read ``--output json`` (CONTRACT §3); this module is only for eyes. It
renders from :meth:`Decisions.to_dict`, so the rows come in the same order as
the JSON lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from preemptd.framework.decisions import Decisions
from preemptd.framework.model import Workload
from preemptd.framework.objects import escape
from rich import box
from rich.console import Console
from rich.markup import escape as escape_markup
from rich.table import Table

from .plugins import PluginInfo

__all__ = ["explain_workload", "print_decisions", "print_plugins"]


def _table(title: str | None, *columns: str) -> Table:
    table = Table(
        title=title, box=box.SIMPLE_HEAD, show_edge=False, title_justify="left", title_style="bold"
    )
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _cell(value: str | list[str]) -> str:
    """A table cell from input text: no markup is interpreted (``[cpu]`` stays ``[cpu]``) and a
    character that is not printable (a newline in a name) is written as an escape, so it cannot
    start a row of its own. A list is one line per item."""
    items = [value] if isinstance(value, str) else value
    return escape_markup("\n".join(escape(item) for item in items))


def _row(table: Table, *cells: str | list[str]) -> None:
    table.add_row(*(_cell(cell) for cell in cells))


def _flavors(flavors: Mapping[str, str]) -> str:
    return ", ".join(f"{resource}={flavor}" for resource, flavor in flavors.items())


def _pod_set_lines(pod_sets: Iterable[Mapping[str, Any]]) -> list[str]:
    return [f"{ps['name']} ×{ps['count']}: {_flavors(ps['flavors'])}" for ps in pod_sets]


def _taken(count: int | None) -> str:
    return "whole workload" if count is None else f"{count} pod{'s' if count != 1 else ''}"


def print_decisions(decisions: Decisions, console: Console) -> None:
    """A summary line, then one table per non-empty kind of decision (growths apart from
    admissions)."""
    data = decisions.to_dict()
    # A running workload grown in place is an ``admitted`` entry marked ``grown``: it gets
    # its own count and table, so "admitted" means newly admitted only.
    admitted = [entry for entry in data["admitted"] if not entry.get("grown")]
    grown = [entry for entry in data["admitted"] if entry.get("grown")]
    console.print(
        f"Session at {data['now']}: {len(admitted)} admitted, "
        + (f"{len(grown)} grown, " if grown else "")
        + f"{len(data['preempted'])} preempted, {len(data['podActions'])} pod actions, "
        f"{len(data['pending'])} pending",
        soft_wrap=True,
    )
    tables = []
    for title, entries in (("Admitted", admitted), ("Grown (running, new totals)", grown)):
        if not entries:
            continue
        table = _table(title, "workload", "queue", "podSets", "borrowing")
        for entry in entries:
            borrowing = "yes" if entry["borrowing"] else "no"
            _row(table, entry["workload"], entry["queue"], _pod_set_lines(entry["podSets"]), borrowing)
        tables.append(table)
    if data["preempted"]:
        table = _table("Preempted", "workload", "preemptor", "reason", "taken", "pods")
        for entry in data["preempted"]:
            _row(
                table,
                entry["workload"],
                entry["preemptor"],
                entry["reason"],
                _taken(entry["count"]),
                entry["pods"],
            )
        tables.append(table)
    if data["podActions"]:
        table = _table("Pod actions", "pod", "action", "preemptor")
        for entry in data["podActions"]:
            _row(table, entry["pod"], entry["action"], entry["preemptor"])
        tables.append(table)
    if data["pending"]:
        table = _table("Pending", "workload", "reason", "message", "waiting for")
        for entry in data["pending"]:
            _row(
                table,
                entry["workload"],
                entry["reason"],
                entry["message"],
                entry["waitingFor"],
            )
        tables.append(table)
    if data.get("shares"):
        # With fair sharing (SEMANTICS §7.6): every queue's weighted share once committed.
        table = _table("Shares", "queue", "weighted share")
        for entry in data["shares"]:
            share = entry["weightedShare"]
            table.add_row(entry["queue"], "inf" if share == 9223372036854775807 else str(share))
        tables.append(table)
    for table in tables:
        console.print()
        console.print(table)


def print_plugins(infos: Iterable[PluginInfo], console: Console) -> None:
    """One row per plugin, in the order sessions call them."""
    table = _table(None, "name", "source", "enabled")
    for info in infos:
        _row(table, info.name, info.source, "yes" if info.enabled else "no")
    console.print(table)


def explain_workload(key: str, decisions: Decisions, workload: Workload | None) -> list[str]:
    """What this session did with ``key`` and why, then the plugins' explanation lines.

    ``workload`` is the snapshot's record of it (``None`` for an inadmissible one).
    """
    lines: list[str] = []
    data = decisions.to_dict()
    for entry in data["admitted"]:
        if entry["workload"] == key and entry.get("grown"):
            lines += _growth_lines(key, entry, workload, decisions.explain(key))
        elif entry["workload"] == key:
            borrowing = ", borrowing" if entry["borrowing"] else ""
            lines.append(f"{key}: admitted to queue {entry['queue']}{borrowing}")
            lines += [f"  podSet {line}" for line in _pod_set_lines(entry["podSets"])]
    for entry in data["preempted"]:
        if entry["workload"] == key:
            lines.append(
                f"{key}: preempted by {entry['preemptor']} ({entry['reason']}): {_taken(entry['count'])}"
            )
            lines += [f"  pod {pod}" for pod in entry["pods"]]
            # The shares that made it a victim, as the preemptor's search recorded them.
            lines += [
                f"  {line}"
                for line in decisions.explain(entry["preemptor"])
                if line.startswith("fair sharing: " + key + " ")
            ]
    for entry in data["pending"]:
        if entry["workload"] == key:
            lines.append(f"{key}: pending ({entry['reason']})")
            if entry["message"]:
                lines.append(f"  message: {entry['message']}")
            if entry["waitingFor"]:
                lines.append(f"  waiting for: {', '.join(entry['waitingFor'])}")
    for entry in data["preempted"]:
        if entry["preemptor"] == key:
            lines.append(
                f"  victim: {entry['workload']} ({entry['reason']}, {_taken(entry['count'])})"
            )
    for entry in data["podActions"]:
        if entry["preemptor"] == key:
            lines.append(f"  pod action: {entry['action']} {entry['pod']}")
    if not lines:
        lines.append(f"{key}: {_untouched(workload)}")
    explanation = decisions.explain(key)
    if explanation:
        lines.append("explanation:")
        lines += [f"  {line}" for line in explanation]
    return lines


def _growth_lines(key: str, entry: Mapping[str, Any], workload: Workload | None, explanation: list[str]) -> list[str]:
    """A running workload grown in place: each podSet's count before and after, its
    flavors, and why it grew no more (its desired count reached, or what one more pod
    would have exceeded)."""
    borrowing = ", borrowing" if entry["borrowing"] else ""
    kind = "grew in place" if workload is not None and workload.is_deployment else "grew back"
    lines = [f"{key}: {kind} in queue {entry['queue']}{borrowing} (already running; not an admission)"]
    before: dict[str, int] = {}
    desired: dict[str, int] = {}
    if workload is not None:
        if workload.admission is not None:
            before = {ps.name: ps.count for ps in workload.admission.pod_sets}
        desired = {ps.name: ps.count for ps in workload.pod_sets}
    stopped = next((line for line in explanation if line.startswith("grows no further: ")), None)
    for ps in entry["podSets"]:
        name, count = ps["name"], ps["count"]
        old = before.get(name, count)
        if old == count:
            lines.append(f"  podSet {name} ×{count}: {_flavors(ps['flavors'])} (unchanged)")
            continue
        wanted = desired.get(name)
        of = f" of {wanted}" if wanted is not None else ""
        lines.append(f"  podSet {name}: {old} → {count}{of} pods on {_flavors(ps['flavors'])}")
        if wanted is not None and count >= wanted:
            lines.append(f"  no more: its desired count ({wanted}) is reached")
        elif stopped is not None:
            lines.append(f"  no more: {stopped.removeprefix('grows no further: ')}")
        elif kind == "grew in place":
            lines.append("  no more: its other replicas do not fit the free quota and node room now")
    return lines


def _untouched(workload: Workload | None) -> str:
    if workload is not None and workload.evicted:
        return "no decision in this session: its eviction is already under way"
    if workload is not None and workload.admission is not None:
        return (
            f"no decision in this session: admitted before it (queue {workload.admission.queue}) "
            "and not chosen as a victim"
        )
    return "no decision in this session"

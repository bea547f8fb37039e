"""The files backend's commit: objects as a backend would leave them (CONTRACT §3).

``preemptd cycle --apply OUT`` writes the input objects back with the decisions
committed, so that feeding OUT to the next ``cycle`` steps through sessions by
hand; the simulator commits through the same function. Each change mirrors
what the Kubernetes backend writes:

* admitted → ``status.admission`` and ``status.admittedAt = now``; a Deployment
  that was already admitted only has its committed counts raised (its run did not
  restart, so ``admittedAt`` is kept);
* a whole victim → the ``Evicted`` condition (its quota stays held until it is gone);
* a shrunk victim → ``status.admission.podSets[].count`` lowered;
* a ``ForceDelete`` pod → the force-delete annotation; a pod chosen as a victim →
  the lowest pod-deletion-cost, so the scale-down removes that very pod;
* a workload with a flavor scan → ``status.flavorScan`` (removed when empty).
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from preemptd.framework.decisions import Admitted, Decisions, Preempted
from preemptd.framework.model import (
    DELETION_COST_ANNOTATION,
    DEPLOYMENT,
    FORCE_DELETE_ANNOTATION,
)
from preemptd.framework.objects import StrayDocument
from preemptd.framework.quantity import format_timestamp

__all__ = ["apply_decisions", "dump_documents", "write_documents"]

# The lowest pod-deletion-cost: the ReplicaSet removes this pod before any other.
VICTIM_DELETION_COST = "-2147483648"

Edit = Callable[[dict[str, Any]], None]


def apply_decisions(documents: Sequence[Any], decisions: Decisions) -> list[Any]:
    """The documents, in their order and shape, with ``decisions`` committed.

    A document is an object, a list of objects or a ``kind: List``; objects inside
    lists are committed like any other. The inputs are not changed: a changed
    object is a copy, and documents that no decision touches are returned as they
    are (not copied).
    """
    now = format_timestamp(decisions.now)
    edits: dict[tuple[str, str], list[Edit]] = {}

    def add(kind: str, key: str, edit: Edit) -> None:
        edits.setdefault((kind, key), []).append(edit)

    for admitted in decisions.admitted:
        add("Workload", admitted.workload, _admit(admitted, now))
    for preempted in decisions.preempted:
        add("Workload", preempted.workload, _preempt(preempted))
        for pod in preempted.pods:
            add("Pod", pod, _annotate(DELETION_COST_ANNOTATION, VICTIM_DELETION_COST))
    for action in decisions.pod_actions:
        if action.action == "ForceDelete":
            add("Pod", action.pod, _annotate(FORCE_DELETE_ANNOTATION, "true"))
    for key, scan in decisions.flavor_scans.items():
        add("Workload", key, _flavor_scan(scan))
    return [_commit(document, edits) for document in documents]


# The kinds decisions change, and their API group (as parse_objects checks it).
_GROUPS = {"Workload": "preemptd.io", "Pod": ""}


def _commit(document: Any, edits: Mapping[tuple[str, str], list[Edit]]) -> Any:
    if isinstance(document, list):
        items = [_commit(item, edits) for item in document]
        return document if all(a is b for a, b in zip(items, document, strict=True)) else items
    if not isinstance(document, Mapping):
        return document
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(document.get("items"), list):
        items = _commit(document["items"], edits)
        return document if items is document["items"] else {**document, "items": items}
    if kind not in _GROUPS or _group(document) not in (None, _GROUPS[kind]):
        return document
    found = edits.get((kind, _key(document)))
    if not found:
        return document
    changed = copy.deepcopy(dict(document))
    for edit in found:
        edit(changed)
    return changed


def _group(obj: Mapping[str, Any]) -> str | None:
    """The API group of ``apiVersion`` (``""`` for the core ``v1``); ``None`` when absent."""
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str):
        return None
    return api_version.rpartition("/")[0]


def _key(obj: Mapping[str, Any]) -> str:
    metadata = _field(obj, "metadata")
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"


def _field(obj: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    """The mapping at ``path``, or an empty one where the object has none."""
    value: Any = obj
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _child(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """``parent[key]`` as a dict, created (or replaced, if it is not a mapping) when needed."""
    value = parent.get(key)
    if not isinstance(value, dict):
        value = parent[key] = {}
    return value


def _admit(admitted: Admitted, now: str) -> Edit:
    pod_sets = [ps.to_dict() for ps in admitted.pod_sets]

    def edit(obj: dict[str, Any]) -> None:
        status = _child(obj, "status")
        owner = _field(obj, "spec", "owner")
        admission = status.get("admission")
        if owner.get("kind") == DEPLOYMENT and isinstance(admission, dict) and admission.get("podSets"):
            # A Deployment grown in place: only its committed counts move.
            current = {ps.get("name"): ps for ps in admission["podSets"] if isinstance(ps, dict)}
            for pod_set in pod_sets:
                if pod_set["name"] in current:
                    current[pod_set["name"]]["count"] = pod_set["count"]
                else:
                    admission["podSets"].append(pod_set)
            return
        status["admission"] = {"queue": admitted.queue, "podSets": pod_sets}
        status["admittedAt"] = now
        # A workload whose earlier eviction has completed is admitted afresh; an Evicted
        # condition left behind would make the next session treat it as leaving.
        conditions = status.get("conditions")
        if isinstance(conditions, list):
            kept = [c for c in conditions if not (isinstance(c, dict) and c.get("type") == "Evicted")]
            if len(kept) != len(conditions):
                status["conditions"] = kept

    return edit


def _preempt(preempted: Preempted) -> Edit:
    def evict(obj: dict[str, Any]) -> None:
        status = _child(obj, "status")
        condition = {
            "type": "Evicted",
            "status": "True",
            "reason": "Preempted",
            "message": f"Preempted to accommodate {preempted.preemptor} ({preempted.reason})",
        }
        conditions = status.get("conditions")
        if not isinstance(conditions, list):
            conditions = status["conditions"] = []
        for index, existing in enumerate(conditions):
            if isinstance(existing, dict) and existing.get("type") == "Evicted":
                conditions[index] = condition
                return
        conditions.append(condition)

    def shrink(obj: dict[str, Any]) -> None:
        admission = _child(obj, "status").get("admission")
        pod_sets = admission.get("podSets") if isinstance(admission, dict) else None
        if not isinstance(pod_sets, list) or not pod_sets:
            return  # nothing committed to lower; the object is not what the session saw
        target = _shrunk_pod_set(obj, pod_sets, preempted.pod_set)
        target["count"] = max(0, int(target.get("count", 0)) - (preempted.count or 0))

    return evict if preempted.count is None else shrink


def _shrunk_pod_set(obj: dict[str, Any], pod_sets: list[Any], named: str | None) -> dict[str, Any]:
    """The podSet named by the decision, else the first elastic one, else the first."""
    admitted = [ps for ps in pod_sets if isinstance(ps, dict)]
    by_name = {ps.get("name"): ps for ps in admitted}
    if named is not None and named in by_name:
        return by_name[named]
    specs = _field(obj, "spec").get("podSets")
    for spec in specs if isinstance(specs, list) else ():
        if isinstance(spec, dict) and spec.get("minCount") is not None and spec.get("name") in by_name:
            return by_name[spec["name"]]
    return admitted[0]


def _annotate(annotation: str, value: str) -> Edit:
    def edit(obj: dict[str, Any]) -> None:
        annotations = _child(_child(obj, "metadata"), "annotations")
        annotations[annotation] = value

    return edit


def _flavor_scan(scan: Mapping[str, Mapping[str, int]]) -> Edit:
    def edit(obj: dict[str, Any]) -> None:
        if scan:
            _child(obj, "status")["flavorScan"] = {ps: dict(r) for ps, r in scan.items()}
        elif isinstance(obj.get("status"), dict):
            obj["status"].pop("flavorScan", None)

    return edit


# --- YAML out ----------------------------------------------------------------------------

_SafeDumper: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_documents(documents: Iterable[Any]) -> str:
    """One YAML stream, a ``---`` before each document, keys in their original order."""
    return yaml.dump_all(
        [document.value if isinstance(document, StrayDocument) else document for document in documents],
        Dumper=_SafeDumper,
        explicit_start=True,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
    )


def write_documents(path: str | Path, documents: Iterable[Any]) -> None:
    """Write the stream to ``path`` whole or not at all (a temporary file, then a rename).

    The temporary file is ``.OUT.XXXXXXXX.tmp`` next to OUT; one left by a run that
    was killed mid-write is removed here, so they never accumulate.
    """
    text = dump_documents(documents)
    target = Path(path)
    leftover = re.compile(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}\.tmp")
    with contextlib.suppress(OSError):  # a folder that cannot be listed is no reason to fail
        for entry in target.parent.iterdir():
            if leftover.fullmatch(entry.name) and entry.is_file() and not entry.is_symlink():
                entry.unlink(missing_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        # mkstemp creates the file 0600; give OUT the mode a plain open() would have.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

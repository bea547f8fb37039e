"""The files backend: snapshot files in, objects with the decisions committed out.

Reading
-------
Snapshot files: YAML streams or JSON, read into ``(file, document)`` pairs.

A file may hold one object, several YAML documents, a list of objects, or a
``kind: List`` with ``items`` (what ``kubectl get -o yaml`` prints for more
than one object); each document is passed on as it is. A directory stands for
its ``*.yaml``, ``*.yml`` and ``*.json`` files in name order, ``-`` for
standard input.

Timestamps stay strings: PyYAML would turn an unquoted
``2026-01-01T00:00:00Z`` into a ``datetime``, which neither JSON input nor
``kubectl`` output ever produces, and which would not survive ``--apply``
unchanged. Whether an object is a valid Workload or Queue is not decided here
(see :mod:`preemptd.framework.objects`). A document that is neither an object
nor a list (a stray plain line, a number) is passed on as a
:class:`~preemptd.framework.objects.StrayDocument`: one bad document, reported
with its index and skipped, while the rest of the file is used. A file holding
nothing but such documents (notes passed by mistake) is not a snapshot: it is
rejected whole, as a file that is not YAML.

An integer too long for Python to convert (more than 4,300 digits) is kept as
its text, so the field holding it is reported as an error of that one object
rather than failing the file.

Committing
----------
Objects as a backend would leave them (CONTRACT §3).

``preemptd cycle --apply OUT`` writes the input objects back with the decisions
committed, so that feeding OUT to the next ``cycle`` steps through sessions by
hand; the simulator commits through the same function. Each change mirrors
what the Kubernetes backend writes:

* admitted → ``status.admission`` and ``status.admittedAt = now``; a Deployment
  that was already admitted, or an elastic workload that grows back (``grown``),
  only has its committed counts raised (its run did not restart, so ``admittedAt``
  is kept);
* a whole victim → the ``Evicted`` condition (its quota stays held until it is gone);
* a shrunk victim → ``status.admission.podSets[].count`` lowered;
* a ``ForceDelete`` pod → the force-delete annotation; a pod chosen as a victim →
  the lowest pod-deletion-cost, so the scale-down removes that very pod;
* a workload with a flavor scan → ``status.flavorScan`` (removed when empty).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import gc
import json
import mmap
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from preemptd.framework.decisions import Admitted, Decisions, Preempted
from preemptd.framework.model import (
    DELETION_COST_ANNOTATION,
    DEPLOYMENT,
    FORCE_DELETE_ANNOTATION,
)
from preemptd.framework.objects import StrayDocument, escape
from preemptd.framework.objects.kueue_status import (
    commit_admitted,
    commit_pending,
    commit_preempted,
    is_kueue_workload,
)
from preemptd.framework.objects.typed import RawItems, decode_items, decode_json
from preemptd.framework.quantity import format_timestamp

__all__ = [
    "SNAPSHOT_SUFFIXES",
    "Document",
    "LoadError",
    "Loaded",
    "apply_decisions",
    "dump_documents",
    "hold_collection",
    "load_files",
    "parse_text",
    "settle_collection",
    "write_documents",
]

Document = dict[str, Any] | list[Any] | StrayDocument | RawItems

SNAPSHOT_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "<stdin>"  # how problems name the file read from "-"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"


@functools.cache
def _loader() -> Any:
    """The safe loader without the implicit timestamp type. Made (and PyYAML imported)
    on first use: reading JSON, as a large snapshot is, needs neither."""
    import yaml

    safe: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(safe):  # type: ignore[misc]
        pass

    Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    Loader.yaml_implicit_resolvers = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag != _TIMESTAMP]
        for first, resolvers in safe.yaml_implicit_resolvers.items()
    }
    return Loader


def _construct_int(loader: Any, node: Any) -> int | str:
    """A YAML integer; one too long to convert stays text (see the module docstring)."""
    try:
        value: int = loader.construct_yaml_int(node)
    except ValueError:
        text: str = loader.construct_scalar(node)
        return text
    return value


class LoadError(Exception):
    """One or more snapshot files could not be read; one line per problem (exit 2).

    ``documents`` holds what the other files gave, for ``validate`` to check too.
    """

    def __init__(self, messages: Sequence[str], documents: Sequence[tuple[str, Document]] = ()) -> None:
        self.messages = list(messages)
        self.documents = list(documents)
        super().__init__("\n".join(self.messages))


def hold_collection() -> None:
    """Pause the cyclic garbage collector while a snapshot is loaded and built.

    Loading creates millions of objects and frees almost none, so every collection it
    would trigger walks the whole growing heap for nothing (it was about half of the load
    of a large cluster). Reference counting still frees everything that is dropped.
    Pair it with :func:`settle_collection`.
    """
    gc.disable()


def settle_collection() -> None:
    """Resume the collector after loading, with everything loaded so far frozen.

    The snapshot lives until the process ends; frozen, it is never walked again by the
    collections that the session's own garbage triggers.
    """
    gc.freeze()
    gc.enable()


class Loaded(list[tuple[str, Document]]):
    """What :func:`load_files` read: ``(file, document)`` pairs, and the files' texts.

    The parsed documents are large (a dict per object, about 2 KB per Pod); once the
    objects are read into the model nobody needs them, except ``--apply``, which writes
    them back. So a caller that will write them back asks :func:`load_files` to keep
    the texts (``keep_text``), drops the documents with :meth:`forget` and reads them
    again with :meth:`again`: the same text parses into the same documents.
    """

    def __init__(
        self,
        documents: Iterable[tuple[str, Document]],
        texts: Sequence[tuple[str, str]] = (),
        files: Sequence[str] = (),
    ) -> None:
        super().__init__(documents)
        self.texts = list(texts)
        self.files = list(files)  # every file read, in order, those that held nothing too

    def forget(self) -> Loaded:
        """Drop the parsed documents (the texts stay); returns itself."""
        self.clear()
        return self

    def again(self) -> list[Document]:
        """The documents of the kept texts, parsed anew, in file and document order."""
        return [
            document
            for path, text in self.texts
            for document in parse_text(text, json_only=path.endswith(".json"))
        ]


def load_files(
    paths: Iterable[str | Path], *, typed: bool = False, keep_text: bool = False
) -> Loaded:
    """Every document of every file, in file order then document order.

    Reads every file before failing, so one :class:`LoadError` names all bad files.
    ``typed`` is :func:`parse_text`'s: for a caller that only hands the documents to
    :func:`~preemptd.framework.objects.parse_objects`. With ``keep_text``, each file's
    text is kept too (see :class:`Loaded`).
    """
    documents: list[tuple[str, Document]] = []
    texts: list[tuple[str, str]] = []
    errors: list[str] = []
    files = _expand(paths, errors)
    for path in files:
        shown = escape(path)  # messages are one line each, whatever the file is called
        text: str | bytes | mmap.mmap
        try:
            if path == STDIN:
                text = sys.stdin.read()
            else:
                # Typed reading takes a JSON file in ASCII (no BOM, nothing to check) as
                # its bytes: a large snapshot is not copied into a string first.
                as_bytes = typed and not keep_text and path.endswith(".json")
                data = _mapped_bytes(path) if as_bytes else Path(path).read_bytes()
                as_bytes = as_bytes and _isascii(data)
                text = data if as_bytes else str(data, "utf-8-sig")
        except OSError as exc:
            errors.append(f"{shown}: cannot read: {exc.strerror or exc}")
            continue
        except UnicodeDecodeError:
            errors.append(f"{shown}: not YAML or JSON: not UTF-8 text")
            continue
        try:
            found = parse_text(text, json_only=path.endswith(".json"), typed=typed)
        except ValueError as exc:
            errors.append(f"{shown}{escape(str(exc))}")
            continue
        if isinstance(text, mmap.mmap):
            found = [_released_as_read(document, text) for document in found]
        documents.extend((path, document) for document in found)
        if keep_text and isinstance(text, str):
            texts.append((path, text))
    if errors:
        raise LoadError(errors, documents)
    return Loaded(documents, texts, files)


def _mapped_bytes(path: str) -> bytes | mmap.mmap:
    """A file's bytes: a regular file's in an anonymous mapping of its size (whose pages
    can be given back one by one: :class:`_ReadPast`), anything else's (a pipe, a
    device, an empty file, a file that changed size while read) as bytes."""
    with open(path, "rb", buffering=0) as file:
        status = os.fstat(file.fileno())
        if stat.S_ISREG(status.st_mode) and status.st_size and _CAN_RELEASE:
            # Private: a shared mapping's pages given back stay in the kernel's memory.
            buffer = mmap.mmap(-1, status.st_size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            with memoryview(buffer) as view:
                filled = 0
                while filled < len(buffer) and (count := file.readinto(view[filled:])):
                    filled += count
            if filled == len(buffer) and not file.read(1):
                return buffer
            file.seek(0)
        return file.readall()


_CAN_RELEASE = hasattr(mmap, "MADV_DONTNEED")
_ASCII_CHUNK = 1 << 20


def _isascii(data: bytes | mmap.mmap) -> bool:
    if isinstance(data, bytes):
        return data.isascii()
    with memoryview(data) as view:
        return all(
            view[start : start + _ASCII_CHUNK].tobytes().isascii() for start in range(0, len(view), _ASCII_CHUNK)
        )


class _ReadPast:
    """Gives back the pages of a file's mapping that lie wholly before an offset the
    intake has read past (:attr:`RawItems.read_past`): their memory leaves the process
    while the items after them are read, instead of all at once with the last item."""

    __slots__ = ("buffer", "released")

    def __init__(self, buffer: mmap.mmap) -> None:
        self.buffer = buffer
        self.released = 0  # the pages before this offset are given back

    def __call__(self, offset: int) -> None:
        end = min(offset, len(self.buffer)) // mmap.PAGESIZE * mmap.PAGESIZE
        if end > self.released:
            self.buffer.madvise(mmap.MADV_DONTNEED, self.released, end - self.released)
            self.released = end


def _released_as_read(document: Document, buffer: mmap.mmap) -> Document:
    if isinstance(document, RawItems):
        return dataclasses.replace(document, read_past=_ReadPast(buffer))
    return document


def _expand(paths: Iterable[str | Path], errors: list[str]) -> list[str]:
    files: list[str] = []
    for path in map(str, paths):
        if path == "-":
            files.append(STDIN)
        elif Path(path).is_dir():
            found = sorted(p for p in Path(path).iterdir() if p.suffix in SNAPSHOT_SUFFIXES)
            if not found:
                errors.append(
                    f"{escape(path)}: no {', '.join(SNAPSHOT_SUFFIXES)} files in this directory"
                )
            files.extend(str(p) for p in found if p.is_file())
        else:
            files.append(path)
    return files


def parse_text(
    text: str | bytes | mmap.mmap, *, json_only: bool = False, typed: bool = False
) -> list[Document]:
    """The documents of one file's text: objects, lists of objects or ``kind: List``.

    Lists are not flattened here: :func:`~preemptd.framework.objects.parse_objects`
    walks them, so a bad item is reported with its path (``items[3].spec``) and
    isolated, and ``--apply`` writes each document back in its own shape.
    Raises ``ValueError`` whose message starts with ``:line:column`` or ``:`` so
    that the caller can put the file name in front of it.

    With ``typed``, a JSON list of objects (or ``kind: List``) is passed on as
    :class:`~preemptd.framework.objects.typed.RawItems`, its objects still text, for
    the typed decoding of :mod:`preemptd.framework.objects`; only reading for the model
    asks for that (``--apply`` and the simulator want the documents themselves).
    ``text`` may be the bytes of a JSON file in ASCII, or a mapping of them (``json_only``,
    as :func:`load_files` passes them).
    """
    documents: list[Any]
    if json_only or (isinstance(text, str) and text.lstrip().startswith(("{", "["))):
        try:
            documents = [decode_items(text) if typed else decode_json(text)]
        except json.JSONDecodeError as exc:
            if json_only:
                raise ValueError(f":{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
            documents = _yaml_documents(text)  # "[a, b]" or "{a: 1}" is YAML, not JSON
        except RecursionError:  # the YAML reader has its own limit; json's is the stack's
            raise ValueError(": not valid JSON: nested too deeply") from None
    else:
        documents = _yaml_documents(text)
    found: list[Document] = []
    strays: list[StrayDocument] = []
    for number, document in enumerate(documents, start=1):
        if isinstance(document, dict | list | RawItems):
            found.append(document)
        elif document is not None:
            # Plain text is a valid YAML document: one string. Nobody means that.
            strays.append(StrayDocument(number, document))
            found.append(strays[-1])
    if strays and len(strays) == len(found):
        # Nothing but strays: not a snapshot at all (a README passed by mistake).
        value = strays[0].value
        kind = "plain text" if isinstance(value, str) else type(value).__name__
        raise ValueError(f": document {strays[0].index}: not YAML or JSON objects, got {kind}")
    return found


def _yaml_documents(text: str | bytes | mmap.mmap) -> list[Any]:
    import yaml

    if not isinstance(text, str):
        text = str(text, "utf-8-sig")
    try:
        return list(yaml.load_all(text, Loader=_loader()))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"{where}: not valid YAML: {problem}") from None


# --- committing ----------------------------------------------------------------------


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
        add(_KUEUE_WORKLOAD, admitted.workload, _kueue(commit_admitted, admitted, now))
    for preempted in decisions.preempted:
        add("Workload", preempted.workload, _preempt(preempted))
        add(_KUEUE_WORKLOAD, preempted.workload, _kueue(commit_preempted, preempted, now))
        for pod in preempted.pods:
            add("Pod", pod, _annotate(DELETION_COST_ANNOTATION, VICTIM_DELETION_COST))
    for action in decisions.pod_actions:
        if action.action == "ForceDelete":
            add("Pod", action.pod, _annotate(FORCE_DELETE_ANNOTATION, "true"))
    for pending in decisions.pending:
        add(_KUEUE_WORKLOAD, pending.workload, _kueue(commit_pending, pending, now))
    for key, scan in decisions.flavor_scans.items():
        add("Workload", key, _flavor_scan(scan))
        add(_KUEUE_WORKLOAD, key, _flavor_scan(scan))
    return [_commit(document, edits) for document in documents]


# The kinds decisions change, and their API group (as parse_objects checks it).
_GROUPS = {"Workload": "preemptd.io", "Pod": ""}
_KUEUE_WORKLOAD = "Workload (kueue.x-k8s.io)"  # Kueue's status shape (objects.kueue)


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
    if is_kueue_workload(document):
        kind = _KUEUE_WORKLOAD
    elif kind not in _GROUPS or _group(document) not in (None, _GROUPS[kind]):
        return document
    found = edits.get((kind, _key(document)))
    if not found:
        return document
    changed = copy.deepcopy(dict(document))
    for edit in found:
        edit(changed)
    return changed


def _kueue(commit: Callable[[dict[str, Any], Any, str], None], decision: Any, now: str) -> Edit:
    """The edit writing ``decision`` into a Kueue Workload in Kueue's status shape."""
    return lambda obj: commit(obj, decision, now)


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
        grown = admitted.grown or owner.get("kind") == DEPLOYMENT
        if grown and isinstance(admission, dict) and admission.get("podSets"):
            # A Deployment or an elastic workload grown in place: only its committed counts move.
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

def dump_documents(documents: Iterable[Any]) -> str:
    """One YAML stream, a ``---`` before each document, keys in their original order."""
    import yaml

    return yaml.dump_all(
        [document.value if isinstance(document, StrayDocument) else document for document in documents],
        Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
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

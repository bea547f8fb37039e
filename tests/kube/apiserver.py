"""An in-process Kubernetes API server that speaks the real REST and watch protocol.

Good enough for the real kubernetes-asyncio client, and for the daemon's tests
and benchmark: nothing about it is mocked at the client's level. It listens
on 127.0.0.1 on a free port and serves

* list (``kind: XList`` with the list's resourceVersion; ``labelSelector``),
  get, create (POST; ``generateName``), replace (PUT, 409 on a stale
  resourceVersion), patch — JSON merge, strategic merge (maps merge; lists of
  containers, env, volumes and conditions merge by key, other lists replace)
  and JSON patch — with 409 when the patch carries a stale resourceVersion,
  delete (``gracePeriodSeconds``, preconditions; a bound pod deleted with a
  grace period gets a ``deletionTimestamp`` and stays until deleted with 0 or
  finalized by the test; other objects go at once, with their dependents by
  ownerReference, as the garbage collector would);
* the ``status`` subresource (a write there changes only status; a write to
  the main resource never changes status), and a Deployment's ``scale``
  subresource (an ``autoscaling/v1`` Scale: get, update, merge patch; a write
  there changes only ``spec.replicas``, as an HPA's does);
* the batch/v1 Job update rules for what preemptd writes (:func:`check_job_update`):
  an immutable ``spec.template`` whose scheduling directives may change only
  while the Job is suspended and has no ``status.startTime``, and a
  ``startTime`` that only a suspended Job may lose;
* custom resources: no update (PUT) without a resourceVersion; schema
  ``format: date-time``, ``maxLength``/``maxItems``/``maxProperties`` and
  ``x-kubernetes-list-type`` map/set uniqueness;
* watch streams (chunked JSON lines ``{type, object}``; ADDED, MODIFIED,
  DELETED, BOOKMARK with ``allowWatchBookmarks``; resume from a
  resourceVersion; ``ERROR`` 410 Gone when the version is older than the kept
  history; ``timeoutSeconds``);
* core/v1 pods, nodes, events, namespaces; batch/v1 jobs; apps/v1
  deployments and statefulsets; scheduling.k8s.io/v1 priorityclasses; coordination.k8s.io/v1
  leases; apiextensions.k8s.io/v1 customresourcedefinitions — and every kind a
  created CRD defines (preemptd.io's), validated and pruned by the CRD's
  OpenAPI schema (422 Invalid), as a real server does.

Fault injection for tests: :meth:`ApiServer.fail` (the next N matching
requests get a status such as 500 or 409), :attr:`ApiServer.latency`,
:meth:`ApiServer.drop_watches` (cut every stream, abruptly or cleanly),
:meth:`ApiServer.compact` (forget history: resuming watches get 410) and
:meth:`ApiServer.restart` (a new resourceVersion epoch: all of the above at
once), :meth:`ApiServer.heal` (forget injected failures), and
:attr:`ApiServer.before_write` (a hook run before each write, e.g. to race the
daemon with a user's edit, or to inject a fault mid-commit).

:attr:`ApiServer.journal` keeps every change ever stored, whatever was
compacted or restarted, for tests to check what happened.

Tests may also reach the store directly (:meth:`ApiServer.put`,
:meth:`ApiServer.get`, :meth:`ApiServer.remove`): such changes are seen by
watchers exactly like API writes, and may hold objects no schema would accept.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as dt
import json
import re
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool = True  # has a status subresource
    schema: Obj | None = None  # openAPIV3Schema, for CRD-defined kinds

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def ref(self) -> tuple[str, str]:
        return (self.group, self.plural)


BUILTIN_KINDS = (
    Kind("", "v1", "pods", "Pod", namespaced=True),
    Kind("", "v1", "nodes", "Node", namespaced=False),
    Kind("", "v1", "events", "Event", namespaced=True, status=False),
    Kind("", "v1", "namespaces", "Namespace", namespaced=False),
    Kind("batch", "v1", "jobs", "Job", namespaced=True),
    Kind("apps", "v1", "deployments", "Deployment", namespaced=True),
    Kind("apps", "v1", "statefulsets", "StatefulSet", namespaced=True),
    Kind("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False, status=False),
    Kind("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True, status=False),
    Kind("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False),
)

# k8s verbs, as RBAC names them.
Verb = str


class ApiFailure(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message


def status_body(code: int, reason: str, message: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _scale_of(deployment: Obj) -> Obj:
    """The ``autoscaling/v1`` Scale of a Deployment (``spec.replicas`` defaults to 1)."""
    metadata = deployment["metadata"]
    spec = deployment.get("spec") or {}
    labels = ((spec.get("selector") or {}).get("matchLabels") or {})
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {k: metadata[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if k in metadata},
        "spec": {"replicas": spec.get("replicas", 1)},
        "status": {"replicas": (deployment.get("status") or {}).get("replicas", 0),
                   "selector": ",".join(f"{k}={v}" for k, v in sorted(labels.items()))},
    }


# --- patches -------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
}


def strategic_merge_patch(target: Any, patch: Any, key: str = "") -> Any:
    """The strategic merge patch for the shapes Kubernetes objects use most.

    Maps merge as in a merge patch; lists whose field has a merge key in
    Kubernetes' schema (containers by name, conditions by type, ...) merge
    element by element; every other list is replaced.
    """
    if isinstance(patch, list) and key in _MERGE_KEYS and isinstance(target, list):
        merge_key = _MERGE_KEYS[key]
        result = [copy.deepcopy(item) for item in target]
        for item in patch:
            if not isinstance(item, dict) or merge_key not in item:
                result.append(copy.deepcopy(item))
                continue
            index = next(
                (i for i, old in enumerate(result) if isinstance(old, dict) and old.get(merge_key) == item[merge_key]),
                None,
            )
            if item.get("$patch") == "delete":
                if index is not None:
                    del result[index]
            elif index is None:
                result.append(copy.deepcopy(item))
            else:
                result[index] = strategic_merge_patch(result[index], item)
        return result
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = strategic_merge_patch(result.get(name), value, name)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiFailure(422, "Invalid", f"bad JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902: add, remove, replace, test, copy, move."""
    document = copy.deepcopy(target)
    if not isinstance(operations, list):
        raise ApiFailure(400, "BadRequest", "a JSON patch is a list of operations")

    def parent_of(path: str) -> tuple[Any, str]:
        parts = _pointer(path)
        if not parts:
            raise ApiFailure(422, "Invalid", "cannot patch the document root")
        node = document
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node, parts[-1]

    def get(path: str) -> Any:
        node = document
        for part in _pointer(path):
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

    for op in operations:
        kind, path = op.get("op"), op.get("path", "")
        try:
            if kind == "test":
                if get(path) != op.get("value"):
                    raise ApiFailure(422, "Invalid", f"test failed at {path}")
                continue
            if kind in ("copy", "move"):
                value = copy.deepcopy(get(op["from"]))
                if kind == "move":
                    node, last = parent_of(op["from"])
                    del node[int(last) if isinstance(node, list) else last]
                kind, op = "add", {"path": path, "value": value}
            node, last = parent_of(path)
            if kind == "add":
                if isinstance(node, list):
                    node.insert(len(node) if last == "-" else int(last), copy.deepcopy(op["value"]))
                else:
                    node[last] = copy.deepcopy(op["value"])
            elif kind == "replace":
                if isinstance(node, list):
                    node[int(last)] = copy.deepcopy(op["value"])
                else:
                    if last not in node:
                        raise ApiFailure(422, "Invalid", f"replace of missing {path}")
                    node[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del node[int(last) if isinstance(node, list) else last]
            else:
                raise ApiFailure(400, "BadRequest", f"unknown JSON patch op {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise ApiFailure(422, "Invalid", f"JSON patch {kind} {path}: {exc}") from None
    return document


# --- schema ------------------------------------------------------------------------------


def validate(schema: Obj, value: Any, path: str, errors: list[str]) -> Any:
    """Check ``value`` against a structural OpenAPI v3 schema; returns it pruned of unknown fields."""
    if value is None:
        if not schema.get("nullable"):
            errors.append(f"{path}: Invalid value: null")
        return value
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            errors.append(f"{path}: Invalid value: must be an integer or a string")
        elif isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: Invalid value: {value!r} does not match {schema['pattern']!r}")
        return value
    kind = schema.get("type")
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
    }
    if kind in checks and not checks[kind](value):
        errors.append(f"{path}: Invalid value: must be of type {kind}")
        return value
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: Unsupported value: {value!r}: supported values: {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: Invalid value: {value!r} does not match {schema['pattern']!r}")
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: Invalid value: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: Too long: may not be longer than {schema['maxLength']}")
        if schema.get("format") == "date-time" and not _RFC3339.match(value):
            errors.append(f"{path}: Invalid value: {value!r} is not a date-time (RFC 3339)")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: Invalid value: {value} is less than {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: Invalid value: {value} is greater than {schema['maximum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: Invalid value: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: Too many: {len(value)}: must have at most {schema['maxItems']} items")
        list_type = schema.get("x-kubernetes-list-type")
        if list_type in ("map", "set"):
            keys = schema.get("x-kubernetes-list-map-keys") or () if list_type == "map" else ()
            seen: set[str] = set()
            for i, item in enumerate(value):
                if keys:
                    if not isinstance(item, dict):
                        continue
                    identity = json.dumps([item.get(k) for k in keys])
                else:
                    identity = json.dumps(item, sort_keys=True)
                if identity in seen:
                    errors.append(f"{path}[{i}]: Duplicate value: {identity}")
                seen.add(identity)
        items = schema.get("items")
        if isinstance(items, dict):
            return [validate(items, item, f"{path}[{i}]", errors) for i, item in enumerate(value)]
        return value
    if isinstance(value, dict):
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            errors.append(f"{path}: Too many: {len(value)}: must have at most {schema['maxProperties']} items")
        for name in schema.get("required", ()):
            if name not in value:
                errors.append(f"{path}.{name}: Required value")
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        result: Obj = {}
        for name, item in value.items():
            if properties is not None and name in properties:
                result[name] = validate(properties[name], item, f"{path}.{name}", errors)
            elif isinstance(additional, dict):
                result[name] = validate(additional, item, f"{path}.{name}", errors)
            elif preserve or additional is True:
                result[name] = item
            # else: pruned, as the real server drops fields its structural schema does not know
        return result
    return value


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


# --- Job update rules -------------------------------------------------------------------------

# What the Job API lets change in the pod template of a suspended Job that has never
# started (status.startTime unset): the scheduling directives. Node selector, tolerations
# and node affinity since the mutable-scheduling-directives feature (beta in 1.23, GA in
# 1.27); the template's labels and annotations, and schedulingGates (1.27), alongside.
_MUTABLE_TEMPLATE_SPEC = ("nodeSelector", "tolerations", "schedulingGates")
_MUTABLE_TEMPLATE_METADATA = ("labels", "annotations")


def _job_template_for_comparison(template: Any, other: Any) -> Any:
    """``template`` with the scheduling directives taken from ``other``."""
    if not isinstance(template, dict):
        return template
    result = copy.deepcopy(template)
    other = other if isinstance(other, dict) else {}
    metadata = dict(result.get("metadata") or {})
    other_metadata = other.get("metadata") or {}
    for name in _MUTABLE_TEMPLATE_METADATA:
        metadata.pop(name, None)
        if name in other_metadata:
            metadata[name] = other_metadata[name]
    result["metadata"] = metadata
    spec = dict(result.get("spec") or {})
    other_spec = other.get("spec") or {}
    for name in _MUTABLE_TEMPLATE_SPEC:
        spec.pop(name, None)
        if name in other_spec:
            spec[name] = other_spec[name]
    affinity = dict(spec.get("affinity") or {})
    other_affinity = other_spec.get("affinity") or {}
    affinity.pop("nodeAffinity", None)
    if "nodeAffinity" in other_affinity:
        affinity["nodeAffinity"] = other_affinity["nodeAffinity"]
    if affinity:
        spec["affinity"] = affinity
    else:
        spec.pop("affinity", None)
    result["spec"] = spec
    return result


def _empty_to_none(value: Any) -> Any:
    """Empty maps and lists are absent fields, as the server's Go types make them."""
    if isinstance(value, dict):
        cleaned = {k: _empty_to_none(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v is not None} or None
    if isinstance(value, list):
        return [_empty_to_none(v) for v in value] or None
    return value


def check_job_update(new: Obj, old: Obj) -> None:
    """The batch/v1 Job update rules for the fields preemptd writes (422 Invalid as the server does).

    ``spec.template`` is immutable, except that the scheduling directives may change
    while the *old* Job is suspended and has never started (no ``status.startTime``):
    the rule of the Job strategy's ``AllowMutableSchedulingDirectives``. The Job
    controller sets ``startTime`` when a Job is resumed and never clears it, so a Job
    that ran must have it cleared (through /status, once suspended) before its
    directives can be given back. ``selector``, ``completionMode`` and ``completions``
    (non-indexed) are immutable too.
    """
    name = (new.get("metadata") or {}).get("name", "")
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errors = []
    for field_name in ("selector", "completionMode", "completions"):
        if _empty_to_none(new_spec.get(field_name)) != _empty_to_none(old_spec.get(field_name)):
            errors.append(f"spec.{field_name}: Invalid value: field is immutable")
    new_template, old_template = new_spec.get("template"), old_spec.get("template")
    suspended = old_spec.get("suspend") is True
    started = (old.get("status") or {}).get("startTime") is not None
    if suspended and not started:
        old_template = _job_template_for_comparison(old_template, new_template)
    if _empty_to_none(new_template) != _empty_to_none(old_template):
        errors.append("spec.template: Invalid value: field is immutable")
    if errors:
        raise ApiFailure(422, "Invalid", f'Job.batch "{name}" is invalid: ' + "; ".join(errors))


def check_job_status_update(new: Obj, old: Obj) -> None:
    """A started Job's ``status.startTime`` changes only while the Job is suspended."""
    old_start = (old.get("status") or {}).get("startTime")
    new_start = (new.get("status") or {}).get("startTime")
    if old_start is not None and new_start != old_start and (new.get("spec") or {}).get("suspend") is not True:
        name = (new.get("metadata") or {}).get("name", "")
        raise ApiFailure(422, "Invalid", f'Job.batch "{name}" is invalid: status.startTime: Required value: '
                         "startTime cannot be removed for unsuspended job")


# --- label selectors --------------------------------------------------------------------------


def selector_matcher(text: str | None) -> Callable[[Obj], bool]:
    if not text:
        return lambda obj: True
    requirements: list[Callable[[dict[str, str]], bool]] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if "!=" in part:
            key, value = (s.strip() for s in part.split("!=", 1))
            requirements.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in part:
            key, value = (s.strip() for s in part.replace("==", "=").split("=", 1))
            requirements.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif part.startswith("!"):
            absent = part[1:].strip()
            requirements.append(lambda labels, k=absent: k not in labels)
        else:
            requirements.append(lambda labels, k=part: k in labels)

    def matches(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(requirement(labels) for requirement in requirements)

    return matches


# --- the store and its watchers ------------------------------------------------------------


@dataclass(slots=True)
class _Event:
    version: int
    kind: Kind
    type: str
    obj: Obj
    line: bytes = b""


@dataclass(slots=True)
class _Watcher:
    kind: Kind
    namespace: str | None
    matches: Callable[[Obj], bool]
    queue: asyncio.Queue[_Event | None] = field(default_factory=asyncio.Queue)
    abrupt: bool = False


@dataclass(slots=True)
class Request:
    method: str
    verb: Verb
    group: str
    plural: str
    subresource: str | None
    namespace: str | None
    name: str | None
    at: float = 0.0  # when it arrived (time.monotonic), before any injected latency


class ApiServer:
    """See the module docstring. ``async with ApiServer() as server: server.url``."""

    def __init__(self, *, history: int = 100_000, bookmark_interval: float = 1.0) -> None:
        self.kinds: dict[tuple[str, str], Kind] = {k.ref: k for k in BUILTIN_KINDS}
        self.objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {k.ref: {} for k in BUILTIN_KINDS}
        self.version = 1
        self.history: deque[_Event] = deque(maxlen=history)
        # Every change ever stored, never compacted nor lost in a restart: what tests check.
        self.journal: list[_Event] = []
        self.oldest = 1  # watches may resume from this version on; older ones are gone
        self.bookmark_interval = bookmark_interval
        self.latency = 0.0
        self.requests: list[Request] = []
        self.last_versions: dict[tuple[str, str], int] = {}  # kind -> version of its last event
        self.before_write: Callable[[Request], None] | None = None
        self._failures: list[tuple[int, int, str, Callable[[Request], bool]]] = []
        self._watchers: list[_Watcher] = []
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.port = 0

    # -- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        self.drop_watches(abrupt=False)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- fault injection --------------------------------------------------------

    def fail(
        self, count: int = 1, *, code: int = 500, reason: str = "InternalError", when: Callable[[Request], bool] = lambda r: True
    ) -> None:
        """The next ``count`` requests that ``when`` matches are answered ``code``."""
        self._failures.append((count, code, reason, when))

    def heal(self) -> None:
        """Forget every injected failure not yet served."""
        self._failures.clear()

    def drop_watches(self, *, abrupt: bool = True) -> None:
        """End every open watch stream: cut the connection (``abrupt``) or end it cleanly."""
        for watcher in self._watchers:
            watcher.abrupt = abrupt
            watcher.queue.put_nowait(None)
        self._watchers.clear()

    def compact(self) -> None:
        """Forget the event history: a watch resuming from an older version gets 410 Gone."""
        self.history.clear()
        self.oldest = self.version + 1

    def restart(self, *, epoch: int = 1_000_000) -> None:
        """As after an apiserver restart on a new storage epoch: versions jump, history and
        streams are gone, so every client must relist."""
        self.version += epoch
        self.compact()
        self.drop_watches(abrupt=True)

    def verbs(self) -> set[tuple[str, str, Verb]]:
        """Every (group, resource[/subresource], verb) requested so far."""
        return {
            (r.group, r.plural + (f"/{r.subresource}" if r.subresource else ""), r.verb) for r in self.requests
        }

    # -- direct store access (tests) ----------------------------------------------

    def kind(self, group: str, plural: str) -> Kind:
        found = self.kinds.get((group, plural))
        if found is None:
            raise KeyError(f"no resource {plural}.{group}")
        return found

    def get(self, group: str, plural: str, name: str, namespace: str | None = None) -> Obj | None:
        kind = self.kind(group, plural)
        return self.objects[kind.ref].get((namespace or "" if kind.namespaced else "", name))

    def list(self, group: str, plural: str, namespace: str | None = None) -> list[Obj]:
        kind = self.kind(group, plural)
        return [
            obj
            for (ns, _), obj in sorted(self.objects[kind.ref].items())
            if namespace is None or ns == namespace
        ]

    def put(self, group: str, plural: str, obj: Obj) -> Obj:
        """Create or replace ``obj`` as is (no validation, status kept): what a test arranges."""
        kind = self.kind(group, plural)
        obj = copy.deepcopy(obj)
        metadata = obj.setdefault("metadata", {})
        key = self._key(kind, metadata.get("namespace"), metadata["name"])
        old = self.objects[kind.ref].get(key)
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        if old is None:
            self._stamp_new(kind, obj, key[0])
        else:
            metadata.setdefault("uid", old["metadata"]["uid"])
            metadata.setdefault("creationTimestamp", old["metadata"].get("creationTimestamp"))
        return self._store(kind, key, obj, "MODIFIED" if old else "ADDED")

    def remove(self, group: str, plural: str, name: str, namespace: str | None = None) -> None:
        """Delete at once, whatever the grace period (a kubelet finishing a pod's termination)."""
        kind = self.kind(group, plural)
        key = self._key(kind, namespace, name)
        if key in self.objects[kind.ref]:
            self._remove(kind, key)

    # -- storage ---------------------------------------------------------------------

    @staticmethod
    def _key(kind: Kind, namespace: str | None, name: str) -> tuple[str, str]:
        return ((namespace or "default") if kind.namespaced else "", name)

    def _stamp_new(self, kind: Kind, obj: Obj, namespace: str) -> None:
        metadata = obj["metadata"]
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata.setdefault("creationTimestamp", _now())
        metadata.setdefault("generation", 1)
        if kind.namespaced:
            metadata["namespace"] = namespace

    def _store(self, kind: Kind, key: tuple[str, str], obj: Obj, type_: str) -> Obj:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.objects[kind.ref][key] = obj
        self._emit(kind, type_, obj)
        if kind.ref == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._register(obj)
        return obj

    def _remove(self, kind: Kind, key: tuple[str, str]) -> Obj:
        obj = self.objects[kind.ref].pop(key)
        self.version += 1
        gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
        self._emit(kind, "DELETED", gone)
        uid = obj["metadata"].get("uid")
        # The garbage collector, in the foreground: dependents go with their owner.
        for other_kind in list(self.kinds.values()):
            for other_key, other in list(self.objects[other_kind.ref].items()):
                references = (other.get("metadata") or {}).get("ownerReferences") or []
                if any(ref.get("uid") == uid for ref in references) and other_key in self.objects[other_kind.ref]:
                    self._remove(other_kind, other_key)
        return gone

    def _emit(self, kind: Kind, type_: str, obj: Obj) -> None:
        event = _Event(self.version, kind, type_, obj)
        event.line = (json.dumps({"type": type_, "object": obj}, separators=(",", ":")) + "\n").encode()
        self.history.append(event)
        self.journal.append(event)
        self.last_versions[kind.ref] = self.version
        if len(self.history) == self.history.maxlen:
            self.oldest = self.history[0].version
        namespace = obj["metadata"].get("namespace")
        for watcher in self._watchers:
            if watcher.kind.ref != kind.ref:
                continue
            if watcher.namespace is not None and watcher.namespace != namespace:
                continue
            if watcher.matches(obj):
                watcher.queue.put_nowait(event)

    def _register(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        versions = [v for v in spec.get("versions") or [] if v.get("served")]
        if not versions:
            return
        version = next((v for v in versions if v.get("storage")), versions[0])
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        kind = Kind(
            group=spec["group"],
            version=version["name"],
            plural=names["plural"],
            kind=names["kind"],
            namespaced=spec.get("scope") == "Namespaced",
            status="status" in (version.get("subresources") or {}),
            schema=schema,
        )
        self.kinds[kind.ref] = kind
        self.objects.setdefault(kind.ref, {})

    # -- HTTP ---------------------------------------------------------------------------

    def _route(self, request: web.Request) -> tuple[Kind, str | None, str | None, str | None]:
        parts = [p for p in request.path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiFailure(404, "NotFound", f"the server could not find the requested resource {request.path}")
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiFailure(404, "NotFound", f"the server could not find the requested resource {request.path}")
        kind = self.kinds.get((group, rest[0]))
        if kind is None or kind.version != version:
            raise ApiFailure(404, "NotFound", f"the server could not find the requested resource {request.path}")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub == "scale" and kind.ref == ("apps", "deployments"):
            return kind, namespace, name, sub
        if sub is not None and sub != "status":
            raise ApiFailure(404, "NotFound", f"no subresource {sub}")
        if sub == "status" and not kind.status:
            raise ApiFailure(404, "NotFound", f"{kind.plural} has no status subresource")
        if namespace is not None and not kind.namespaced:
            raise ApiFailure(404, "NotFound", f"{kind.plural} is not namespaced")
        return kind, namespace, name, sub

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            kind, namespace, name, sub = self._route(request)
            watch = request.query.get("watch") in ("true", "1")
            verb = _verb(request.method, name, watch)
            record = Request(request.method, verb, kind.group, kind.plural, sub, namespace, name, time.monotonic())
            self.requests.append(record)
            if self.latency:
                await asyncio.sleep(self.latency)
            self._inject(record)
            if verb == "watch":
                return await self._watch(request, kind, namespace)
            if verb not in ("get", "list") and self.before_write is not None:
                self.before_write(record)
            body = await request.json() if request.can_read_body and request.method != "GET" else None
            result, code = self._dispatch(request, verb, kind, namespace, name, sub, body)
            return web.json_response(result, status=code, dumps=_dumps)
        except ApiFailure as failure:
            return web.json_response(status_body(failure.code, failure.reason, failure.message), status=failure.code)
        except json.JSONDecodeError as exc:
            return web.json_response(status_body(400, "BadRequest", f"invalid JSON: {exc}"), status=400)

    def _inject(self, record: Request) -> None:
        for index, (count, code, reason, when) in enumerate(self._failures):
            if when(record):
                if count <= 1:
                    del self._failures[index]
                else:
                    self._failures[index] = (count - 1, code, reason, when)
                raise ApiFailure(code, reason, f"injected failure ({code})")

    def _dispatch(
        self, request: web.Request, verb: Verb, kind: Kind, namespace: str | None, name: str | None,
        sub: str | None, body: Any,
    ) -> tuple[Obj, int]:
        if verb == "list":
            return self._list(kind, namespace, request.query.get("labelSelector")), 200
        if verb == "create":
            return self._create(kind, namespace, body), 201
        assert name is not None
        key = self._key(kind, namespace, name)
        current = self.objects[kind.ref].get(key)
        if current is None:
            raise ApiFailure(404, "NotFound", f'{kind.plural}.{kind.group or "core"} "{name}" not found')
        if sub == "scale":
            return self._scale(request, verb, kind, key, current, body), 200
        if verb == "get":
            return current, 200
        if verb == "delete":
            return self._delete(kind, key, current, request, body), 200
        if verb == "update":
            if not isinstance(body, dict):
                raise ApiFailure(400, "BadRequest", "the body must be an object")
            wanted = (body.get("metadata") or {}).get("resourceVersion")
            return self._update(kind, key, current, body, sub, wanted, put=True), 200
        # patch
        content_type = request.content_type
        if content_type == "application/json-patch+json":
            patched = json_patch(current, body)
            wanted = (patched.get("metadata") or {}).get("resourceVersion")
        elif content_type == "application/merge-patch+json":
            patched = merge_patch(current, body)
            wanted = ((body or {}).get("metadata") or {}).get("resourceVersion")
        elif content_type == "application/strategic-merge-patch+json":
            if kind.schema is not None:
                raise ApiFailure(415, "UnsupportedMediaType", "strategic merge patch is not supported for custom resources")
            patched = strategic_merge_patch(current, body)
            wanted = ((body or {}).get("metadata") or {}).get("resourceVersion")
        else:
            raise ApiFailure(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")
        return self._update(kind, key, current, patched, sub, wanted), 200

    def _scale(
        self, request: web.Request, verb: Verb, kind: Kind, key: tuple[str, str], current: Obj, body: Any
    ) -> Obj:
        """A Deployment's ``autoscaling/v1`` Scale; a write changes its ``spec.replicas`` only."""
        scale = _scale_of(current)
        if verb == "get":
            return scale
        if verb == "update":
            wanted = body if isinstance(body, dict) else {}
        elif verb == "patch" and request.content_type == "application/merge-patch+json":
            wanted = merge_patch(scale, body)
        else:
            raise ApiFailure(405, "MethodNotAllowed", f"{verb} is not supported on deployments/scale here")
        replicas = (wanted.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiFailure(422, "Invalid", f'Scale "{key[1]}" is invalid: spec.replicas: must be a count')
        version = (wanted.get("metadata") or {}).get("resourceVersion") if verb == "update" else (
            ((body or {}).get("metadata") or {}).get("resourceVersion"))
        obj = {**current, "spec": {**(current.get("spec") or {}), "replicas": replicas}}
        return _scale_of(self._update(kind, key, current, obj, None, version))

    def _list(self, kind: Kind, namespace: str | None, selector: str | None) -> Obj:
        matches = selector_matcher(selector)
        items = [
            obj
            for (ns, _), obj in sorted(self.objects[kind.ref].items())
            if (namespace is None or ns == namespace) and matches(obj)
        ]
        return {
            "apiVersion": kind.api_version,
            "kind": f"{kind.kind}List",
            "metadata": {"resourceVersion": str(self.version)},
            "items": items,
        }

    def _check(self, kind: Kind, obj: Obj, *, status_only: bool = False) -> Obj:
        if kind.schema is None:
            return obj
        errors: list[str] = []
        if status_only:
            # A write to /status is checked on its status alone (the apiextensions server's rule).
            schema = (kind.schema.get("properties") or {}).get("status")
            if schema is None or "status" not in obj:
                return obj
            pruned_status = validate(schema, obj["status"], ".status", errors)
            if errors:
                name = (obj.get("metadata") or {}).get("name", "")
                raise ApiFailure(422, "Invalid", f'{kind.kind} "{name}" is invalid: ' + "; ".join(e.lstrip(".") for e in errors))
            return {**obj, "status": pruned_status}
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        schema = {k: v for k, v in kind.schema.items() if k != "required"}
        properties = {k: v for k, v in (schema.get("properties") or {}).items() if k not in ("apiVersion", "kind", "metadata")}
        pruned = validate({**schema, "properties": properties}, body, "", errors)
        for name in kind.schema.get("required") or ():
            if name not in obj:
                errors.append(f".{name}: Required value")
        if errors:
            name = (obj.get("metadata") or {}).get("name", "")
            message = f'{kind.kind} "{name}" is invalid: ' + "; ".join(e.lstrip(".") for e in errors)
            raise ApiFailure(422, "Invalid", message)
        return {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj} | pruned

    def _create(self, kind: Kind, namespace: str | None, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise ApiFailure(400, "BadRequest", "the body must be an object")
        obj = copy.deepcopy(body)
        metadata = obj.setdefault("metadata", {})
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = metadata["generateName"] + uuid.uuid4().hex[:5]
        if not metadata.get("name"):
            raise ApiFailure(422, "Invalid", "metadata.name: Required value")
        if kind.namespaced and metadata.get("namespace") not in (None, namespace):
            raise ApiFailure(400, "BadRequest", "the namespace of the object does not match the request")
        for key in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            metadata.pop(key, None)
        key = self._key(kind, namespace, metadata["name"])
        if key in self.objects[kind.ref]:
            raise ApiFailure(409, "AlreadyExists", f'{kind.plural} "{metadata["name"]}" already exists')
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        if kind.status and kind.schema is not None:
            obj.pop("status", None)  # custom resources: status is written through /status only
        obj = self._check(kind, obj)
        self._stamp_new(kind, obj, key[0])
        return self._store(kind, key, obj, "ADDED")

    def _update(
        self, kind: Kind, key: tuple[str, str], current: Obj, wanted_obj: Obj, sub: str | None, version: Any,
        *, put: bool = False,
    ) -> Obj:
        if put and kind.schema is not None and version in (None, ""):
            # Custom resources never allow an unconditional update (the apiextensions strategy).
            raise ApiFailure(422, "Invalid", f'{kind.kind} "{key[1]}" is invalid: metadata.resourceVersion: '
                             "Invalid value: 0: must be specified for an update")
        if version not in (None, "") and str(version) != current["metadata"]["resourceVersion"]:
            raise ApiFailure(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {kind.plural} "{key[1]}": the object has been modified; '
                "please apply your changes to the latest version and try again",
            )
        if sub == "status":
            obj = {**current, "status": copy.deepcopy(wanted_obj.get("status"))}
            if obj["status"] is None:
                del obj["status"]
            obj["metadata"] = dict(current["metadata"])
        else:
            obj = copy.deepcopy(wanted_obj)
            metadata = obj.setdefault("metadata", {})
            for field_name in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp"):
                if field_name in current["metadata"]:
                    metadata[field_name] = current["metadata"][field_name]
            if kind.status:
                if "status" in current:
                    obj["status"] = current["status"]
                else:
                    obj.pop("status", None)
            if obj.get("spec") != current.get("spec"):
                metadata["generation"] = int(current["metadata"].get("generation", 1)) + 1
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        if kind.ref == ("batch", "jobs"):
            if sub == "status":
                check_job_status_update(obj, current)
            else:
                check_job_update(obj, current)
        obj = self._check(kind, obj, status_only=sub == "status")
        return self._store(kind, key, obj, "MODIFIED")

    def _delete(self, kind: Kind, key: tuple[str, str], current: Obj, request: web.Request, body: Any) -> Obj:
        options = body if isinstance(body, dict) else {}
        grace = options.get("gracePeriodSeconds")
        if "gracePeriodSeconds" in request.query:
            grace = int(request.query["gracePeriodSeconds"])
        preconditions = options.get("preconditions") or {}
        for field_name in ("uid", "resourceVersion"):
            wanted = preconditions.get(field_name)
            if wanted is not None and wanted != current["metadata"].get(field_name):
                raise ApiFailure(409, "Conflict", f"Precondition failed: {field_name} does not match")
        if kind.ref == ("", "pods") and (current.get("spec") or {}).get("nodeName"):
            if grace is None:
                grace = int((current.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
            if grace > 0:
                if current["metadata"].get("deletionTimestamp"):
                    return current
                stamp = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=grace)).strftime("%Y-%m-%dT%H:%M:%SZ")
                obj = {**current, "metadata": {**current["metadata"], "deletionTimestamp": stamp,
                                                "deletionGracePeriodSeconds": grace}}
                return self._store(kind, key, obj, "MODIFIED")
        return self._remove(kind, key)

    async def _watch(self, request: web.Request, kind: Kind, namespace: str | None) -> web.StreamResponse:
        query = request.query
        since_text = query.get("resourceVersion", "")
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        timeout = float(query.get("timeoutSeconds", "1800"))
        watcher = _Watcher(kind, namespace, selector_matcher(query.get("labelSelector")))
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if since_text in ("", "0"):
            # No version: the current state as ADDED events, then changes (the real server's rule).
            backlog = [
                _Event(self.version, kind, "ADDED", obj)
                for (ns, _), obj in sorted(self.objects[kind.ref].items())
                if (namespace is None or ns == namespace) and watcher.matches(obj)
            ]
        else:
            since = int(since_text)
            if since < self.oldest - 1:
                gone = status_body(410, "Expired", f"too old resource version: {since} ({self.oldest - 1})")
                await response.write((json.dumps({"type": "ERROR", "object": gone}) + "\n").encode())
                await response.write_eof()
                return response
            backlog = [
                e for e in self.history
                if e.version > since and e.kind.ref == kind.ref
                and (namespace is None or e.obj["metadata"].get("namespace") == namespace)
                and watcher.matches(e.obj)
            ]
        self._watchers.append(watcher)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            for event in backlog:
                await response.write(event.line or _line(event))
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    event = await asyncio.wait_for(watcher.queue.get(), min(left, self.bookmark_interval))
                except TimeoutError:
                    if bookmarks:
                        bookmark = {
                            "type": "BOOKMARK",
                            "object": {
                                "kind": kind.kind,
                                "apiVersion": kind.api_version,
                                "metadata": {"resourceVersion": str(self.version)},
                            },
                        }
                        await response.write((json.dumps(bookmark) + "\n").encode())
                    continue
                if event is None:
                    if watcher.abrupt and request.transport is not None:
                        request.transport.close()
                        return response
                    break
                await response.write(event.line)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(ValueError):
                self._watchers.remove(watcher)
        return response


def _line(event: _Event) -> bytes:
    return (json.dumps({"type": event.type, "object": event.obj}, separators=(",", ":")) + "\n").encode()


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _verb(method: str, name: str | None, watch: bool) -> Verb:
    if method == "GET":
        if watch:
            return "watch"
        return "get" if name else "list"
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    if method not in verbs or (method == "POST" and name) or (method != "POST" and not name):
        raise ApiFailure(405, "MethodNotAllowed", f"{method} is not supported here")
    return verbs[method]


def load_manifests(server: ApiServer, documents: Iterable[Obj]) -> None:
    """Put manifests into the store as a ``kubectl apply`` would create them (no checks)."""
    plurals = {k.kind: k for k in server.kinds.values()}
    for document in documents:
        kind = plurals.get(document.get("kind", ""))
        if kind is not None:
            server.put(kind.group, kind.plural, document)


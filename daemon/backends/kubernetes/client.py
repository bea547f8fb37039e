"""Talking to the API server: where the cluster is, and one small typed door to it.

The daemon finds its cluster the way kubectl and controllers do: the pod's
service account when it runs in a cluster, else ``$KUBECONFIG`` or
``~/.kube/config`` (both through ``kubernetes_asyncio.config``).

Every request goes through :class:`Kube`, which sits on kubernetes-asyncio's
``ApiClient.call_api`` (its auth, TLS, token refresh and error handling) but
keeps objects as plain JSON dicts: the generated models are slow to build and
the scheduler reads a handful of fields. All writes are JSON merge patches or
creates; a patch that carries ``metadata.resourceVersion`` is refused with 409
by the server when the object changed since that version, which is how every
write here gets optimistic concurrency.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException

__all__ = [
    "DEPLOYMENTS",
    "EVENTS",
    "FLAVORS",
    "JOBS",
    "LEASES",
    "LOCAL_QUEUES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "PRIORITY_CLASSES",
    "QUEUES",
    "WORKLOADS",
    "WORKLOAD_PRIORITY_CLASSES",
    "ApiError",
    "Kube",
    "Resource",
    "WriteObserver",
    "load_configuration",
]

Obj = dict[str, Any]
Objs = list[Obj]


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource: where it lives and what its objects are called."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if sub is not None:
                base += f"/{sub}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
JOBS = Resource("batch", "v1", "jobs", "Job", namespaced=True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
QUEUES = Resource("preemptd.io", "v1alpha1", "queues", "Queue", namespaced=False)
FLAVORS = Resource("preemptd.io", "v1alpha1", "resourceflavors", "ResourceFlavor", namespaced=False)
WORKLOADS = Resource("preemptd.io", "v1alpha1", "workloads", "Workload", namespaced=True)
LOCAL_QUEUES = Resource("preemptd.io", "v1alpha1", "localqueues", "LocalQueue", namespaced=True)
WORKLOAD_PRIORITY_CLASSES = Resource(
    "preemptd.io", "v1alpha1", "workloadpriorityclasses", "WorkloadPriorityClass", namespaced=False
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


class ApiError(Exception):
    """A request the server refused (``status`` is the HTTP code, 0 when unreachable)."""

    def __init__(self, status: int, reason: str, message: str = "") -> None:
        self.status = status
        self.reason = reason
        self.message = message
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def gone(self) -> bool:
        return self.status == 410


def _api_error(exc: ApiException) -> ApiError:
    message = ""
    reason = str(exc.reason or "")
    body: Any = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body:
        try:
            status = json.loads(body)
        except ValueError:
            message = body[:200]
        else:
            if isinstance(status, dict):
                message = str(status.get("message", ""))
                reason = str(status.get("reason") or reason)
    return ApiError(int(exc.status or 0), reason, message)


async def load_configuration(*, kubeconfig: str | None = None, context: str | None = None) -> Configuration:
    """The cluster's address and credentials: in-cluster first, else a kubeconfig file."""
    configuration = Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return configuration
        except kube_config.ConfigException:
            pass  # a pod without a mounted token: fall back to a kubeconfig
    # Read at call time: kubernetes_asyncio reads $KUBECONFIG once, when it is imported.
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    await kube_config.load_kube_config(
        config_file=path, context=context, client_configuration=configuration, persist_config=False
    )
    return configuration


WriteObserver = Callable[[str, str, float, int | None], None]
"""``(verb, resource, seconds, error status or None)`` after each write: the metrics' feed."""

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}

_RESPONSE = {code: "object" for code in (200, 201, 202)}
_MERGE = "application/merge-patch+json"
_JSON_PATCH = "application/json-patch+json"


class Kube:
    """Verbs on resources, with objects as dicts. ``writes`` counts requests that change state.

    ``observer``, when set, hears of every write: its verb (as RBAC names it),
    resource, duration and, when it failed, the status (0: no answer).
    """

    __slots__ = ("api", "observer", "writes")

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self.writes = 0
        self.observer: WriteObserver | None = None

    @classmethod
    def from_configuration(cls, configuration: Configuration) -> Kube:
        return cls(ApiClient(configuration))

    async def close(self) -> None:
        await self.api.close()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 30.0,
        resource: str = "",
    ) -> Any:
        if method == "GET":
            return await self._send(method, path, query, body, content_type, timeout)
        self.writes += 1
        started = time.perf_counter()
        try:
            result = await self._send(method, path, query, body, content_type, timeout)
        except ApiError as exc:
            self._observe(method, resource or path, started, exc.status)
            raise
        self._observe(method, resource or path, started, None)
        return result

    def _observe(self, method: str, resource: str, started: float, status: int | None) -> None:
        if self.observer is not None:
            self.observer(_VERBS.get(method, method.lower()), resource, time.perf_counter() - started, status)

    async def _send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, Any]],
        body: Any,
        content_type: str,
        timeout: float | None,
    ) -> Any:
        try:
            return await self.api.call_api(
                path,
                method,
                query_params=list(query),
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                response_types_map=_RESPONSE,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _request_timeout=timeout,
            )
        except ApiException as exc:
            raise _api_error(exc) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiError(0, type(exc).__name__, str(exc)) from None

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        found: Obj = await self._call("GET", resource.path(namespace, name))
        return found

    async def list(
        self, resource: Resource, *, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[Objs, str]:
        """Every object and the list's resourceVersion (the point a watch resumes from)."""
        query = [("labelSelector", label_selector)] if label_selector else []
        listed = await self._call("GET", resource.path(namespace), query=query, timeout=120.0)
        items = listed.get("items") or []
        return items, str((listed.get("metadata") or {}).get("resourceVersion", ""))

    async def create(self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None) -> Obj:
        created: Obj = await self._call("POST", resource.path(namespace), body=dict(body), resource=str(resource))
        return created

    async def replace(self, resource: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None) -> Obj:
        """A PUT of the whole object; 409 when its ``metadata.resourceVersion`` is stale."""
        replaced: Obj = await self._call("PUT", resource.path(namespace, name), body=dict(body), resource=str(resource))
        return replaced

    async def patch(
        self,
        resource: Resource,
        name: str,
        body: Mapping[str, Any] | Sequence[Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        """A JSON merge patch (a list body: a JSON patch); 409 when its resourceVersion is stale."""
        content_type = _MERGE if isinstance(body, Mapping) else _JSON_PATCH
        patched: Obj = await self._call(
            "PATCH", resource.path(namespace, name, subresource), body=body, content_type=content_type,
            resource=f"{resource}/{subresource}" if subresource else str(resource),
        )
        return patched

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
    ) -> None:
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        await self._call("DELETE", resource.path(namespace, name), body=options, resource=str(resource))

    async def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        connected: Callable[[], None] | None = None,
    ) -> AsyncGenerator[Obj, None]:
        """The raw watch events after ``resource_version``, until the server ends the stream.

        An ``ERROR`` event is yielded like any other: the caller decides (410 → relist).
        ``connected`` is called once the server has accepted the watch (status 200),
        before any event: a quiet resource's watch is up before it has anything to say.
        """
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        try:
            response = await self.api.call_api(
                resource.path(),
                "GET",
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                # No total timeout: the stream lives until timeoutSeconds; a silent
                # connection (no event, no bookmark) for this long is a dead one.
                _request_timeout=aiohttp.ClientTimeout(sock_connect=10, sock_read=timeout_seconds + 30),
            )
        except ApiException as exc:
            raise _api_error(exc) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiError(0, type(exc).__name__, str(exc)) from None
        try:
            if response.status != 200:
                refused = ApiException(status=response.status, reason=response.reason or "")
                refused.body = await response.text()
                raise _api_error(refused)
            if connected is not None:
                connected()
            while True:
                try:
                    line = await response.content.readline()
                except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                    raise ApiError(0, type(exc).__name__, str(exc)) from None
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            response.release()

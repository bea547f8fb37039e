"""Informers: list+watch, bookmarks, relist on 410 Gone, reconnect with backoff."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from preemptd.daemon.backends.kubernetes.client import PODS, Kube
from preemptd.daemon.backends.kubernetes.informers import Informer, trim_pod

from .apiserver import ApiServer
from .cluster import until

pytestmark = pytest.mark.asyncio


def _pod(name: str, node: str = "node-1", phase: str = "Running") -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"preemptd.io/workload": "job-a", "x": "y"},
                     "annotations": {"big": "z" * 100}, "managedFields": [{"manager": "kubectl"}]},
        "spec": {"nodeName": node, "priority": 5, "volumes": [{"name": "v"}],
                 "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": phase, "podIP": "10.0.0.1"},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def __call__(self, kind: str, old: dict | None, new: dict | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        self.events.append((kind, obj["metadata"]["name"]))


@pytest_asyncio.fixture
async def informer(kube: Kube) -> AsyncIterator[tuple[Informer, Recorder]]:
    recorder = Recorder()
    informer = Informer(kube, PODS, on_event=recorder, trim=trim_pod, backoff=(0.01, 0.05))
    task = asyncio.create_task(informer.run(), name=informer.name)
    await asyncio.wait_for(informer.synced.wait(), 5)
    yield informer, recorder
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_watch_delivers_added_modified_deleted(server: ApiServer, informer) -> None:
    """Changes after the list arrive in order, and the store follows them."""
    watched, recorder = informer
    server.put("", "pods", _pod("a"))
    server.put("", "pods", _pod("a", phase="Succeeded"))
    server.remove("", "pods", "a", "default")
    await until(lambda: len(recorder.events) == 3, what="three events")
    assert [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")] == recorder.events
    assert {} == watched.store


async def test_bookmarks_move_the_version_forward(server: ApiServer, informer) -> None:
    """A quiet resource still advances its resourceVersion through bookmarks."""
    watched, _ = informer
    server.put("", "nodes", {"metadata": {"name": "n"}})  # another kind: no pod event
    await until(lambda: int(watched.resource_version) >= server.version, what="a bookmark")


async def test_gone_relists_and_reports_what_changed_while_disconnected(server: ApiServer, informer) -> None:
    """410 Gone on resume: the relist is diffed, so consumers see exactly what they missed."""
    watched, recorder = informer
    for name in ("a", "b"):
        server.put("", "pods", _pod(name))
    await until(lambda: len(recorder.events) == 2, what="two pods")
    # Cut the stream and change things before the informer can resume; history is lost.
    server.drop_watches(abrupt=True)
    server.remove("", "pods", "a", "default")
    server.put("", "pods", _pod("b", phase="Failed"))
    server.put("", "pods", _pod("c"))
    server.compact()
    await until(lambda: watched.relists == 1 and len(recorder.events) == 5, what="the relist")
    assert sorted([("DELETED", "a"), ("MODIFIED", "b"), ("ADDED", "c")]) == sorted(recorder.events[2:])
    assert {"default/b", "default/c"} == set(watched.store)
    server.put("", "pods", _pod("d"))  # and the watch goes on from the relist
    await until(lambda: ("ADDED", "d") in recorder.events, what="a pod after the relist")


async def test_reconnects_with_backoff_through_server_errors(server: ApiServer, informer) -> None:
    """Dropped streams and 5xx answers are retried with backoff; nothing is lost."""
    watched, recorder = informer
    server.fail(3, code=500, when=lambda r: r.verb in ("watch", "list") and r.plural == "pods")
    server.drop_watches(abrupt=True)
    server.put("", "pods", _pod("late"))
    await until(lambda: ("ADDED", "late") in recorder.events, what="the pod after the errors")
    assert 3 <= watched.failures
    assert 0 == watched.relists


async def test_restart_with_a_new_epoch_relists(server: ApiServer, informer) -> None:
    """An apiserver restart on a new resourceVersion epoch: the informer relists and goes on."""
    watched, recorder = informer
    server.put("", "pods", _pod("before"))
    await until(lambda: ("ADDED", "before") in recorder.events, what="the first pod")
    server.restart()
    server.put("", "pods", _pod("after"))
    await until(lambda: ("ADDED", "after") in recorder.events, what="the pod after the restart")
    assert 1 == watched.relists
    assert int(watched.resource_version) > 1_000_000


async def test_pods_keep_only_what_the_scheduler_reads() -> None:
    """A cached pod holds its identity, the workload label, two annotations, requests and phase."""
    pod = _pod("a")
    pod["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"] = "-1"
    trimmed = trim_pod(pod)
    assert {"preemptd.io/workload": "job-a"} == trimmed["metadata"]["labels"]
    assert {"controller.kubernetes.io/pod-deletion-cost": "-1"} == trimmed["metadata"]["annotations"]
    assert "managedFields" not in trimmed["metadata"]
    assert {"nodeName": "node-1", "priority": 5,
            "containers": [{"resources": {"requests": {"cpu": "1"}}}]} == trimmed["spec"]
    assert {"phase": "Running"} == trimmed["status"]

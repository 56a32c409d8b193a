"""Keys and routes in memory: one snapshot per process, reloaded when the cache version
in Redis moves (console.gateway.changes bumps it after every relevant write).

A snapshot holds every active key (by sha256 digest) and, per served model name, the
clusters that serve it: the serving ones' head nodes (where requests go) and every
cluster's state (for the 404/503 answers). Loading is one pass over a few small tables
on the gateway's own database thread; a request never queries the database.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import close_old_connections

T = TypeVar("T")

# One thread per process for the gateway's database work (snapshot loads, usage
# flushes): they never queue behind Django's thread for sync views, and at most one
# database connection per process is held for them.
_db_thread = concurrent.futures.ThreadPoolExecutor(
    max_workers=1, thread_name_prefix="gateway-db"
)


async def on_db_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn`` on the gateway's database thread; the connection is recycled the way
    Django recycles it after a request (CONN_MAX_AGE, health checks)."""

    def job() -> T:
        close_old_connections()
        try:
            return fn(*args)
        finally:
            close_old_connections()

    return await asyncio.get_running_loop().run_in_executor(_db_thread, job)


@dataclass(frozen=True)
class KeyInfo:
    """What a request needs of its API key."""

    pk: int
    name: str
    prefix: str
    rpm: int
    tpm: int


@dataclass(frozen=True)
class ModelRoute:
    """One served model name: the serving upstreams and every cluster's state."""

    upstreams: tuple[Any, ...]  # routing.Upstream of the serving clusters
    clusters: tuple[tuple[str, str], ...]  # (name, state) of every cluster, by name
    max_model_len: int  # the smallest of the serving clusters' profiles (0: unknown)


@dataclass
class Snapshot:
    version: int
    keys: dict[str, KeyInfo] = field(default_factory=dict)
    models: dict[str, ModelRoute] = field(default_factory=dict)

    @property
    def served(self) -> list[str]:
        return sorted(name for name, route in self.models.items() if route.upstreams)


def snapshot_load(version: int) -> Snapshot:
    """Read keys and routes from the database (sync; on the database thread)."""
    # Late: routing imports this module (snapshot_for), and models need the app registry.
    from console.gateway import routing
    from console.models import ApiKey, Cluster

    keys = {
        k.digest: KeyInfo(k.pk, k.name, k.prefix, k.rpm, k.tpm)
        for k in ApiKey.objects.filter(revoked_at=None).only(
            "pk", "name", "prefix", "rpm", "tpm", "digest"
        )
    }
    clusters: dict[str, list[tuple[str, str]]] = {}
    for name, state, model in Cluster.objects.order_by("name").values_list(
        "name", "state", "profile__served_model_name"
    ):
        clusters.setdefault(model, []).append((name, str(state)))
    pools: dict[str, list[Any]] = {}
    for upstream in routing.serving_upstreams():
        pools.setdefault(upstream.model, []).append(upstream)
    models = {
        model: ModelRoute(
            tuple(pools.get(model, ())),
            tuple(states),
            min(
                (u.max_model_len for u in pools.get(model, ()) if u.max_model_len),
                default=0,
            ),
        )
        for model, states in clusters.items()
    }
    return Snapshot(version, keys, models)


_current = Snapshot(version=-1)
_loading: dict[int, asyncio.Future[Snapshot]] = {}


def current() -> Snapshot:
    return _current


async def snapshot_for(version: int) -> Snapshot:
    """The snapshot of ``version`` (read from Redis before calling): the cached one, or
    a fresh load that concurrent requests of this process share.

    Any mismatch reloads, so a counter that went back (Redis restarted) is followed
    too; a load always reads the database after its version was read, so its rows
    are at least that new.
    """
    global _current
    loop = asyncio.get_running_loop()
    while _current.version != version:
        pending = _loading.get(id(loop))
        if pending is not None:
            await asyncio.shield(pending)  # then check its version against ours
            continue
        pending = loop.create_future()
        _loading[id(loop)] = pending
        try:
            snap = await on_db_thread(snapshot_load, version)
        except BaseException as exc:
            pending.set_exception(exc)
            pending.exception()  # marked retrieved; each waiter re-raises it
            raise
        finally:
            _loading.pop(id(loop), None)
        _current = snap
        pending.set_result(snap)
        return snap
    return _current


def snapshot_reset() -> None:
    """Forget the snapshot (tests, or a process that must re-read at once)."""
    global _current
    _current = Snapshot(version=-1)

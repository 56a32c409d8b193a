"""Model name -> the head nodes of clusters serving it; least outstanding requests
across the pool.

Routes come from the process's snapshot (console.gateway.snapshot), never from a
query per request. Outstanding requests are counted in process and shared between
worker processes through Redis (console.gateway.peers): a process ranks upstreams by
its own live count plus the other processes' counts as last published (at most
``peers.PUBLISH_S`` old).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.conf import settings

from console.engine_auth import engine_api_key
from console.gateway import peers
from console.gateway.errors import GatewayError
from console.gateway.ratelimit import cache_version
from console.gateway.snapshot import Snapshot, snapshot_for
from console.models import ClusterState, Node, NodeRole
from engine.versions import version_key

SERVING = (
    ClusterState.RUNNING,
    ClusterState.DEGRADED,
)  # degraded = a firing alert, still answering
TRANSITIONAL = (ClusterState.STARTING, ClusterState.DRAINING, ClusterState.STOPPING)
MESSAGES_SINCE = (0, 11, 1)  # vLLM serves /v1/messages natively from 0.11.1
COUNT_TOKENS_SINCE = (0, 33, 0)

_outstanding: defaultdict[int, int] = defaultdict(int)


@dataclass(frozen=True)
class Upstream:
    """One cluster's API server: where to send a request and what its engine version
    supports."""

    cluster_id: int
    cluster_name: str
    base_url: str
    vllm_version: str
    model: str = ""
    max_model_len: int = 0
    # the engine's --api-key (console.engine_auth), sent as a bearer token; never logged
    api_key: str | None = None
    # tokens per streamed event after the first (the profile's --stream-interval)
    stream_interval: int = 1

    def has(self, since: tuple[int, ...]) -> bool:
        return version_key(self.vllm_version) >= since


def served_models(snap: Snapshot) -> list[str]:
    """Model names served by a cluster that can answer now."""
    return snap.served


def route(snap: Snapshot, model: object) -> list[Upstream]:
    """The serving clusters for ``model``.

    Raises GatewayError 400 for a missing or malformed name, 404 when no cluster
    serves the model, 503 + Retry-After when clusters exist but none is serving
    (draining, restarting, stopped).
    """
    if not isinstance(model, str) or not model:
        raise GatewayError(
            400,
            "model is required: give the served model name "
            "(GET /v1/models lists them).",
            param="model",
        )
    entry = snap.models.get(model)
    if entry is not None and entry.upstreams:
        return list(entry.upstreams)
    if entry is None:
        shown = (
            model if model.isprintable() and len(model) <= 120 else repr(model[:120])
        )
        raise GatewayError(
            404,
            f"The model `{shown}` does not exist: no cluster serves it "
            "(GET /v1/models lists the served models).",
            param="model",
        )
    states = ", ".join(f"{name}: {state}" for name, state in entry.clusters)
    transitional = any(state in TRANSITIONAL for _, state in entry.clusters)
    retry = settings.GATEWAY_RETRY_AFTER_S * (1 if transitional else 6)
    raise GatewayError(
        503,
        f"The model `{model}` is temporarily unavailable ({states}); "
        f"retry after {retry} s.",
        retry_after=retry,
    )


async def upstreams_for(model: str) -> list[Upstream]:
    """``route`` on a snapshot as new as the cache version in Redis."""

    return route(await snapshot_for(await cache_version()), model)


def _heads() -> object:
    # a serving cluster whose on-demand correctness gate failed (policy enforce) is
    # held out until a gate passes (console.services.acceptance)
    return Node.objects.filter(
        role=NodeRole.HEAD,
        rank=0,
        cluster__state__in=SERVING,
        cluster__gate_blocked=False,
    ).select_related("cluster__profile")


def serving_upstreams() -> list[Upstream]:
    """Every serving cluster's head as an upstream (sync, one query)."""
    return [_upstream(h) for h in _heads().order_by("cluster__name")]  # type: ignore[attr-defined]


def _serving_pool(model: str) -> list[Upstream]:
    heads = _heads().filter(cluster__profile__served_model_name=model)  # type: ignore[attr-defined]
    return [_upstream(h) for h in heads]


def _upstream(head: Node) -> Upstream:
    cluster = head.cluster
    assert cluster is not None  # the query follows head -> cluster
    base_url = f"http://{_host(head.management_ip)}:{head.api_port}"
    profile = cluster.profile
    return Upstream(
        cluster.pk,
        cluster.name,
        base_url,
        profile.vllm_version,
        model=profile.served_model_name,
        max_model_len=profile.max_model_len or 0,
        api_key=engine_api_key(cluster.name),
        stream_interval=stream_interval(profile.extra_flags),
    )


def stream_interval(flags: object) -> int:
    """``--stream-interval`` among a profile's extra flags, else vLLM's default 1
    (vllm/config/scheduler.py ``stream_interval: int = Field(default=1, ge=1)``: an
    event carries the first token at once, then up to that many tokens)."""
    if not isinstance(flags, list):
        return 1
    for i, flag in enumerate(flags):
        value = None
        if flag == "--stream-interval" and i + 1 < len(flags):
            value = flags[i + 1]
        elif isinstance(flag, str) and flag.startswith("--stream-interval="):
            value = flag.split("=", 1)[1]
        if isinstance(value, str) and value.isdigit() and int(value) >= 1:
            return int(value)
    return 1


def _host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


def _load(upstream: Upstream) -> tuple[int, str]:
    return (
        _outstanding[upstream.cluster_id] + peers.others(upstream.cluster_id),
        upstream.cluster_name,
    )


def upstream_pick(pool: list[Upstream]) -> Upstream:
    """The upstream with the fewest requests in flight (this process's live count plus
    the other processes' last published counts; first by name on a tie)."""
    return min(pool, key=_load)


def upstreams_by_load(pool: list[Upstream]) -> list[Upstream]:
    """The pool ordered by requests in flight (then by name)."""
    return sorted(pool, key=_load)


def outstanding_enter(upstream: Upstream) -> None:
    _outstanding[upstream.cluster_id] += 1


def outstanding_leave(upstream: Upstream) -> None:
    _outstanding[upstream.cluster_id] -= 1


def outstanding(cluster_id: int) -> int:
    """Requests in flight from this process."""
    return _outstanding[cluster_id]


def outstanding_all() -> dict[int, int]:
    return {k: v for k, v in _outstanding.items() if v}

"""Model name -> the head nodes of clusters serving it; least outstanding requests
across the pool.

Outstanding requests are counted in process (one dict per console process): each
worker process balances its own traffic, which is what it can see without a network
round trip per request.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings

from console.gateway.errors import GatewayError
from console.models import Cluster, ClusterState, Node, NodeRole

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

    def has(self, since: tuple[int, ...]) -> bool:
        return version_key(self.vllm_version) >= since


def version_key(version: str) -> tuple[int, ...]:
    """ "0.11.1" -> (0, 11, 1); a suffix ("0.11.1rc2") keeps its leading digits."""
    return tuple(
        int(m.group())
        for m in (re.match(r"\d+", p) for p in version.split(".")[:3])
        if m
    )


async def served_models() -> list[str]:
    """Model names served by a cluster that can answer now."""
    names = (
        Cluster.objects.filter(state__in=SERVING)
        .values_list("profile__served_model_name", flat=True)
        .distinct()
    )
    return sorted({n async for n in names})


async def upstreams_for(model: str) -> list[Upstream]:
    """The serving clusters for ``model`` (one query when some cluster serves it).

    Raises GatewayError 404 when no cluster serves the model, 503 + Retry-After when
    clusters exist but none is serving (draining, restarting, stopped).
    """
    if not isinstance(model, str) or not model:
        raise GatewayError(
            400,
            "model is required: give the served model name "
            "(GET /v1/models lists them).",
            param="model",
        )
    # In the shared thread pool: concurrent requests do not queue on one thread.
    pool = await sync_to_async(_serving_pool, thread_sensitive=False)(model)
    if pool:
        return pool
    clusters = [
        c async for c in Cluster.objects.filter(profile__served_model_name=model)
    ]
    if not clusters:
        raise GatewayError(
            404,
            f"The model `{model}` does not exist: no cluster serves it "
            "(GET /v1/models lists the served models).",
            param="model",
        )
    states = ", ".join(f"{c.name}: {c.state}" for c in clusters)
    transitional = any(c.state in TRANSITIONAL for c in clusters)
    retry = settings.GATEWAY_RETRY_AFTER_S * (1 if transitional else 6)
    raise GatewayError(
        503,
        f"The model `{model}` is temporarily unavailable ({states}); "
        f"retry after {retry} s.",
        retry_after=retry,
    )


def _serving_pool(model: str) -> list[Upstream]:
    heads = Node.objects.filter(
        role=NodeRole.HEAD,
        rank=0,
        cluster__profile__served_model_name=model,
        cluster__state__in=SERVING,
    ).select_related("cluster__profile")
    return [_upstream(h) for h in heads]


def _upstream(head: Node) -> Upstream:
    cluster = head.cluster
    assert cluster is not None  # the query follows head -> cluster
    base_url = f"http://{_host(head.management_ip)}:{head.api_port}"
    return Upstream(cluster.pk, cluster.name, base_url, cluster.profile.vllm_version)


def _host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


def upstream_pick(pool: list[Upstream]) -> Upstream:
    """The upstream with the fewest requests in flight from this process (first by name
    on a tie)."""
    return min(pool, key=lambda u: (_outstanding[u.cluster_id], u.cluster_name))


def upstreams_by_load(pool: list[Upstream]) -> list[Upstream]:
    """The pool ordered by requests in flight from this process (then by name)."""
    return sorted(pool, key=lambda u: (_outstanding[u.cluster_id], u.cluster_name))


def outstanding_enter(upstream: Upstream) -> None:
    _outstanding[upstream.cluster_id] += 1


def outstanding_leave(upstream: Upstream) -> None:
    _outstanding[upstream.cluster_id] -= 1


def outstanding(cluster_id: int) -> int:
    return _outstanding[cluster_id]

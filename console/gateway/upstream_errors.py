"""What the gateway tells the alerting side: engine errors it saw, per cluster.

A refused connection, a broken exchange or a 5xx answer from an engine of a serving
cluster is counted in one Redis hash; each alert evaluation takes (reads and clears)
the counts, so the ``engine.gateway_errors`` metric is "errors since the last round".
"""

from __future__ import annotations

import logging

import redis

from console.gateway.ratelimit import _redis

log = logging.getLogger(__name__)

ERRORS_KEY = "gw:upstream_errors"  # hash: cluster pk -> count since the last evaluation
TOTAL_KEY = (
    "gw:upstream_errors_total"  # hash: cluster pk -> count ever (Prometheus counter)
)


async def upstream_error(cluster_id: int) -> None:
    """Count one engine error for ``cluster_id``; never fails the client's request."""
    try:
        async with _redis().pipeline(transaction=False) as pipe:
            pipe.hincrby(ERRORS_KEY, str(cluster_id), 1)
            pipe.hincrby(TOTAL_KEY, str(cluster_id), 1)
            await pipe.execute()
    except redis.RedisError as exc:  # the gateway keeps serving without its signal
        log.warning(
            "could not record an upstream error of cluster %s: %s", cluster_id, exc
        )


def upstream_errors_take(client: redis.Redis) -> dict[int, int]:
    """The counts since the last call, cleared atomically (control side, sync)."""
    with client.pipeline(transaction=True) as pipe:
        pipe.hgetall(ERRORS_KEY)
        pipe.delete(ERRORS_KEY)
        raw, _ = pipe.execute()
    return {int(k): int(v) for k, v in raw.items()}


def upstream_errors_total(client: redis.Redis) -> dict[int, int]:
    """Engine errors the gateway has seen per cluster, ever (for the exporter)."""
    return {int(k): int(v) for k, v in client.hgetall(TOTAL_KEY).items()}

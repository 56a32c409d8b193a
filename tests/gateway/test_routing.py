"""Routing: model -> serving clusters' heads, least outstanding requests, 404/503 by
cluster state, version gates."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from console.gateway import routing
from console.gateway.errors import GatewayError
from console.models import ClusterState, Node
from tests.factories import make_cluster, make_profile

pytestmark = pytest.mark.django_db(transaction=True)


def pool_cluster(
    name: str, state: str, model: str = "pool-m", version: str = "0.23.0"
) -> None:
    profile = make_profile(
        name=f"{name} profile", served_model_name=model, vllm_version=version
    )
    cluster = make_cluster(name=name, nodes=2, profile=profile)
    cluster.state = state
    cluster.save(update_fields=["state"])


def test_it_picks_the_cluster_with_the_fewest_outstanding_requests() -> None:
    pool_cluster("pool-a", ClusterState.RUNNING)
    pool_cluster("pool-b", ClusterState.DEGRADED)  # a firing alert; still answers
    pool_cluster("pool-c", ClusterState.DRAINING)
    pool = async_to_sync(routing.upstreams_for)("pool-m")
    assert sorted(u.cluster_name for u in pool) == ["pool-a", "pool-b"]
    heads = Node.objects.filter(cluster__name__in=["pool-a", "pool-b"], rank=0)
    assert {u.base_url for u in pool} == {
        f"http://{h.management_ip}:{h.api_port}" for h in heads
    }  # rank 0's IP and API port
    held = []
    try:
        for expected in ("pool-a", "pool-b", "pool-a", "pool-b"):
            chosen = routing.upstream_pick(pool)
            assert chosen.cluster_name == expected
            routing.outstanding_enter(chosen)
            held.append(chosen)
        routing.outstanding_leave(held.pop(1))  # pool-b finishes one
        assert routing.upstream_pick(pool).cluster_name == "pool-b"
    finally:
        for u in held:
            routing.outstanding_leave(u)


def test_it_answers_404_for_unknown_models_and_503_while_restarting() -> None:
    with pytest.raises(GatewayError) as unknown:
        async_to_sync(routing.upstreams_for)("nobody-serves-this")
    assert unknown.value.status == 404 and unknown.value.param == "model"
    pool_cluster("pool-r", ClusterState.STARTING)
    with pytest.raises(GatewayError) as busy:
        async_to_sync(routing.upstreams_for)("pool-m")
    assert (
        busy.value.status == 503
        and busy.value.retry_after == 10
        and "pool-r: starting" in busy.value.message
    )
    pool_cluster("pool-s", ClusterState.STOPPED, model="stopped-m")
    with pytest.raises(GatewayError) as stopped:
        async_to_sync(routing.upstreams_for)("stopped-m")
    assert stopped.value.status == 503 and stopped.value.retry_after == 60


@pytest.mark.parametrize(
    ("version", "messages", "count_tokens"),
    [
        ("0.10.2", False, False),
        ("0.11.1", True, False),
        ("0.23.0", True, False),
        ("0.33.0", True, True),
        ("0.11.1rc2", True, False),
    ],
)
def test_it_knows_which_versions_serve_the_anthropic_api(
    version: str, messages: bool, count_tokens: bool
) -> None:
    upstream = routing.Upstream(1, "c", "http://x", version)
    assert upstream.has(routing.MESSAGES_SINCE) is messages
    assert upstream.has(routing.COUNT_TOKENS_SINCE) is count_tokens


def test_an_upstream_knows_its_engines_stream_interval() -> None:
    # the profile's --stream-interval (either spelling) reaches the relay's estimate of
    # a cut stream's tokens; anything else means vLLM's default, 1
    for flags, expected in (
        (["--async-scheduling", "--stream-interval", "8"], 8),
        (["--stream-interval=4"], 4),
        (["--stream-interval"], 1),
        (["--stream-interval", "0"], 1),
        ([], 1),
    ):
        name = f"si-{expected}-{len(flags)}"
        profile = make_profile(
            name=f"{name} profile", served_model_name=name, extra_flags=flags
        )
        cluster = make_cluster(name=name, nodes=1, profile=profile)
        cluster.state = ClusterState.RUNNING
        cluster.save(update_fields=["state"])
        (upstream,) = async_to_sync(routing.upstreams_for)(name)
        assert upstream.stream_interval == expected, flags

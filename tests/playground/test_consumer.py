"""The playground socket against a sim engine: stream, usage, Stop aborts, refusals."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from console.asgi import application
from console.models import ClusterState, Node
from console.services.operations import cluster_set_state
from monitoring.alerts.services import alerts_publish
from tests.factories import free_port
from tests.monitoring.test_consumers import ORIGIN, session_headers
from tests.playground.conftest import Engine, running_cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PROMPT = [{"role": "user", "content": "Tell me about Ascend NPUs."}]


async def connect(user: Any) -> WebsocketCommunicator:
    """A socket as the page opens it, with the language switch set to English (the
    messages asserted here are English; the default UI language is zh-Hans)."""
    headers = [
        (name, value + b"; django_language=en" if name == b"cookie" else value)
        for name, value in await sync_to_async(session_headers)(user)
    ]
    comm = WebsocketCommunicator(application, "/ws/playground/", headers=headers)
    connected, code = await comm.connect()
    assert connected, code
    return comm


async def until(
    comm: WebsocketCommunicator, kind: str, timeout: float = 30
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Receive until a message of ``kind``; return it and everything before it."""
    before = []
    while True:
        msg = await comm.receive_json_from(timeout=timeout)
        if msg["type"] == kind:
            return msg, before
        assert msg["type"] != "error", msg
        before.append(msg)


async def wait_value(fn: Any, expected: float, timeout: float = 15) -> float:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await sync_to_async(fn)()
        if value >= expected or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.1)


async def test_it_streams_tokens_with_usage_the_engine_counted(
    engine: Engine, operator: Any, caplog: Any
) -> None:
    cluster = await sync_to_async(running_cluster)(engine)
    comm = await connect(operator)
    await comm.send_json_to({"type": "watch", "cluster": cluster.pk})
    state = await comm.receive_json_from(timeout=5)
    assert (
        state["type"] == "state"
        and state["state"] == "running"
        and state["notice"] is None
    )

    prompt_before = await sync_to_async(engine.metric)("vllm:prompt_tokens_total")
    gen_before = await sync_to_async(engine.metric)("vllm:generation_tokens_total")
    with caplog.at_level(logging.INFO, logger="console.playground"):
        await comm.send_json_to(
            {
                "type": "send",
                "id": 1,
                "cluster": cluster.pk,
                "system": "Be brief.",
                "messages": PROMPT,
                "temperature": 0.2,
                "top_p": 0.9,
                "max_tokens": 24,
                "stop": ["\n\n\n"],
            }
        )
        done, before = await until(comm, "done")
    assert before[0] == {
        "type": "start",
        "id": 1,
        "cluster": cluster.pk,
        "model": "pg-model",
    }
    tokens = [m for m in before if m["type"] == "token"]
    assert len(tokens) >= 3, "the answer arrived in several chunks"
    assert "ttft_ms" in tokens[0] and tokens[0]["ttft_ms"] > 0
    assert all("ttft_ms" not in t for t in tokens[1:])
    assert "".join(t["text"] for t in tokens).strip()
    # Usage is the engine's own count: its counters moved by exactly these numbers.
    prompt_after = await sync_to_async(engine.metric)("vllm:prompt_tokens_total")
    gen_after = await sync_to_async(engine.metric)("vllm:generation_tokens_total")
    assert done["prompt_tokens"] == prompt_after - prompt_before > 0
    assert done["completion_tokens"] == gen_after - gen_before
    assert 1 < done["completion_tokens"] <= 24
    assert done["ttft_ms"] > 0 and done["itl_ms"] > 0 and done["tokens_per_s"] > 0
    assert done["finish_reason"] in ("length", "stop")
    assert any(
        operator.username in r.getMessage() and "pg-c" in r.getMessage()
        for r in caplog.records
    )

    # A second turn carries the history; a cluster.state push turns the banner on.
    await comm.send_json_to(
        {
            "type": "send",
            "id": 2,
            "cluster": cluster.pk,
            "max_tokens": 4,
            "messages": [
                *PROMPT,
                {"role": "assistant", "content": "Sure."},
                {"role": "user", "content": "Shorter."},
            ],
        }
    )
    done2, _ = await until(comm, "done")
    assert done2["prompt_tokens"] > done["prompt_tokens"] - 10
    await sync_to_async(cluster_set_state)(cluster, ClusterState.DRAINING)
    pushed = await comm.receive_json_from(timeout=5)
    assert (
        pushed["type"] == "state"
        and pushed["state"] == "draining"
        and "draining" in pushed["notice"]
    )

    # Running again, but a firing critical alert degrades it: banner, sending refused.
    await sync_to_async(cluster_set_state)(cluster, ClusterState.RUNNING)
    assert (await comm.receive_json_from(timeout=5))["notice"] is None
    alert = await sync_to_async(firing_critical_alert)(cluster)
    await sync_to_async(alerts_publish)([alert])
    pushed = await comm.receive_json_from(timeout=5)
    assert pushed["state"] == "running" and "critical alert firing" in pushed["notice"]
    await comm.send_json_to(
        {"type": "send", "id": 9, "cluster": cluster.pk, "messages": PROMPT}
    )
    error = await comm.receive_json_from(timeout=5)
    assert error["type"] == "error" and "critical alert firing" in error["message"]
    await comm.disconnect()


def firing_critical_alert(cluster: Any) -> Any:
    from django.utils import timezone

    from monitoring.models.alerts import Alert, AlertRule, AlertState, Scope, Severity

    rule, _ = AlertRule.objects.get_or_create(
        name="pg engine down",
        defaults={
            "metric": "engine_up",
            "scope": Scope.CLUSTER,
            "comparison": "lt",
            "threshold": 1,
            "severity": Severity.CRITICAL,
        },
    )
    now = timezone.now()
    return Alert.objects.create(
        rule=rule,
        cluster=cluster,
        target=cluster.name,
        state=AlertState.FIRING,
        severity=Severity.CRITICAL,
        fault_onset_at=now,
        pending_at=now,
        fired_at=now,
    )


async def test_it_aborts_the_engine_request_on_stop_and_on_a_closed_socket(
    engine: Engine, operator: Any
) -> None:
    cluster = await sync_to_async(running_cluster)(engine)
    comm = await connect(operator)
    aborts = await sync_to_async(engine.aborts)()
    await comm.send_json_to(
        {
            "type": "send",
            "id": 7,
            "cluster": cluster.pk,
            "messages": PROMPT,
            "max_tokens": 4000,
        }
    )
    await until(comm, "token")
    await until(comm, "token")
    await comm.send_json_to({"type": "stop", "id": 7})
    stopped, _ = await until(comm, "stopped")
    assert stopped["id"] == 7 and stopped["ttft_ms"] > 0 and stopped["itl_ms"] > 0
    assert await wait_value(engine.aborts, aborts + 1) == aborts + 1

    # Another answer can start after a Stop; closing the page aborts it too.
    await comm.send_json_to(
        {
            "type": "send",
            "id": 8,
            "cluster": cluster.pk,
            "messages": PROMPT,
            "max_tokens": 4000,
        }
    )
    await until(comm, "token")
    await comm.disconnect()
    assert await wait_value(engine.aborts, aborts + 2) == aborts + 2


async def test_it_says_when_the_engine_is_unreachable(
    engine: Engine, operator: Any
) -> None:
    cluster = await sync_to_async(running_cluster)(engine, name="pg-gone")
    port = free_port()  # nothing listens there
    await sync_to_async(Node.objects.filter(cluster=cluster).update)(api_port=port)
    comm = await connect(operator)
    await comm.send_json_to(
        {"type": "send", "id": 5, "cluster": cluster.pk, "messages": PROMPT}
    )
    assert (await comm.receive_json_from(timeout=5))["type"] == "start"
    error = await comm.receive_json_from(timeout=15)
    assert error["type"] == "error" and error["id"] == 5
    assert error["message"].startswith(f"engine unreachable at http://127.0.0.1:{port}")
    await comm.disconnect()


@pytest.mark.parametrize(
    "state", [ClusterState.STOPPED, ClusterState.DEGRADED, ClusterState.STARTING]
)
async def test_it_refuses_a_cluster_that_is_not_running_with_a_clear_message(
    engine: Engine, operator: Any, state: str
) -> None:
    cluster = await sync_to_async(running_cluster)(
        engine, name=f"pg-{state}", state=state
    )
    aborts_or_requests = await sync_to_async(engine.metric)("vllm:prompt_tokens_total")
    comm = await connect(operator)
    await comm.send_json_to({"type": "watch", "cluster": cluster.pk})
    watched = await comm.receive_json_from(timeout=5)
    assert watched["state"] == state and watched["notice"]
    await comm.send_json_to(
        {"type": "send", "id": 3, "cluster": cluster.pk, "messages": PROMPT}
    )
    error = await comm.receive_json_from(timeout=5)
    assert error["type"] == "error" and error["id"] == 3
    assert (
        error["message"].startswith(f"pg-{state}: ")
        and str(state) in error["message"].lower()
    )
    assert (
        await sync_to_async(engine.metric)("vllm:prompt_tokens_total")
        == aborts_or_requests
    )
    await comm.disconnect()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"temperature": 5}, "temperature"),
        ({"top_p": "x"}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "messages"),
        ({"cluster": "nope"}, "cluster"),
    ],
)
async def test_it_names_the_bad_field(
    engine: Engine, operator: Any, change: dict[str, Any], field: str
) -> None:
    cluster = await sync_to_async(running_cluster)(engine)
    comm = await connect(operator)
    await comm.send_json_to(
        {"type": "send", "id": 4, "cluster": cluster.pk, "messages": PROMPT, **change}
    )
    error = await comm.receive_json_from(timeout=5)
    assert (
        error["type"] == "error"
        and error["field"] == field
        and error["message"].startswith(f"{field}: ")
    )
    await comm.disconnect()


async def test_it_refuses_viewers_anonymous_users_and_foreign_origins(
    viewer: Any, operator: Any
) -> None:
    comm = WebsocketCommunicator(
        application,
        "/ws/playground/",
        headers=await sync_to_async(session_headers)(viewer),
    )
    assert await comm.connect() == (False, 4403)
    comm = WebsocketCommunicator(
        application, "/ws/playground/", headers=[ORIGIN, (b"host", b"127.0.0.1")]
    )
    assert await comm.connect() == (False, 4403)
    headers = [
        h for h in await sync_to_async(session_headers)(operator) if h[0] != b"origin"
    ]
    comm = WebsocketCommunicator(
        application,
        "/ws/playground/",
        headers=[*headers, (b"origin", b"http://evil.example")],
    )
    connected, _ = await comm.connect()
    assert not connected

"""A real rank-ordered restart behind the gateway: the cluster drains, new requests get
503 + Retry-After in the protocol's own shape, the stream already in flight finishes
whole, and the restarted cluster serves again. Real agents, control worker, sim engines."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from console.gateway.services import apikey_create
from console.models import Cluster, ClusterState
from console.models.operations import OperationState
from console.services.operations import operation_start
from tests.agents import agents, control_worker
from tests.factories import make_cluster, make_user
from tests.integration.test_operations import wait_op

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# 0.3: a decode step ~12 ms, so 1,500 tokens stream for well over ten seconds.
SIM = {"SIM_TIME_SCALE": "0.3", "SIM_LOAD_S": "0.3"}
CONTROL = {
    "WARMUP_REQUESTS": "2",
    "ENGINE_HEALTH_TIMEOUT_S": "90",
    "DRAIN_TIMEOUT_S": "90",
    "OPERATION_HEARTBEAT_S": "1",
}


def wait_state(cluster: Cluster, state: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cluster.refresh_from_db()
        if cluster.state == state:
            return
        time.sleep(0.1)
    raise AssertionError(f"{cluster.name} is {cluster.state}, not {state}")


def test_a_restart_drains_refuses_new_requests_and_lets_the_stream_finish(
    gateway_url: str, tmp_path: Path
) -> None:
    cluster = make_cluster("gwr", nodes=4, free_ports=True)
    nodes = cluster.ranked_nodes()
    model = cluster.profile.served_model_name
    operator = make_user("rita", "operator")
    _, secret = apikey_create(name="restart-app", user=None, rpm=1000, tpm=10_000_000)
    headers = {"Authorization": f"Bearer {secret}"}
    env = {**SIM, "SIM_STATE_DIR": str(tmp_path)}
    with (
        agents(
            [n.name for n in nodes],
            extra_env=env,
            npu_ips={n.name: n.npu_ips for n in nodes},
        ),
        control_worker(CONTROL),
    ):
        started = wait_op(
            operation_start(cluster=cluster, kind="start", user=operator), timeout=180
        )
        assert started.state == OperationState.SUCCEEDED, started.error

        stream: dict[str, Any] = {
            "chunks": 0,
            "done": False,
            "finish": None,
            "first": threading.Event(),
        }

        def read_stream() -> None:
            body = {
                "model": model,
                "messages": [{"role": "user", "content": "Tell a long story."}],
                "max_tokens": 1500,
                "ignore_eos": True,  # vLLM's extra parameter: all 1,500 tokens
                "stream": True,
            }
            with httpx.stream(
                "POST",
                f"{gateway_url}/v1/chat/completions",
                json=body,
                headers=headers,
                timeout=120,
            ) as answer:
                assert answer.status_code == 200
                for line in answer.iter_lines():
                    if line == "data: [DONE]":
                        stream["done"] = True
                    elif line.startswith("data: "):
                        chunk = json.loads(line[6:])
                        stream["chunks"] += 1
                        stream["first"].set()
                        for choice in chunk.get("choices", []):
                            stream["finish"] = (
                                choice.get("finish_reason") or stream["finish"]
                            )

        reader = threading.Thread(target=read_stream)
        reader.start()
        assert stream["first"].wait(30), "the stream never started"
        restart = operation_start(
            cluster=cluster, kind="restart", user=operator, reason="drain test"
        )
        wait_state(cluster, ClusterState.DRAINING)
        refused = httpx.post(
            f"{gateway_url}/v1/chat/completions",
            json={
                "model": model,
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4,
            },
            headers=headers,
            timeout=30,
        )
        assert refused.status_code == 503 and int(refused.headers["Retry-After"]) > 0
        assert refused.json()["error"]["type"]  # OpenAI's error shape
        refused_a = httpx.post(
            f"{gateway_url}/v1/messages",
            json={
                "model": model,
                "max_tokens": 4,
                "messages": [{"role": "user", "content": "hi"}],
            },
            headers={"x-api-key": secret},
            timeout=30,
        )
        assert refused_a.status_code == 503 and refused_a.json()["type"] == "error"
        assert reader.is_alive()  # still streaming while the cluster drains
        reader.join(timeout=120)
        assert stream["done"] and stream["finish"] == "length", (
            stream
        )  # finished whole, not cut
        assert stream["chunks"] >= 1000
        op = wait_op(restart, timeout=240)
        assert op.state == OperationState.SUCCEEDED, op.error
        drain = op.steps.get(name__startswith="Stop first: Drain")
        assert "still in flight" not in drain.summary, drain.summary
        again = httpx.post(
            f"{gateway_url}/v1/chat/completions",
            json={
                "model": model,
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4,
            },
            headers=headers,
            timeout=30,
        )
        assert again.status_code == 200, again.text

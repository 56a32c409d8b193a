"""End-to-end push latency: sample ingested → telemetry.update received by 20 WebSocket clients.

    .venv/bin/python tests/bench/bench_push.py [--clients 20] [--rounds 50]

Real parts: uvicorn serving console.asgi on a free port, the bundled Redis as the
channel layer, 20 aiohttp WebSocket clients logged in as a viewer. Each round
ingests one 4-node cluster sample (8 NPUs each) and times, per client, from the
start of ingest_round (parse + store + commit + publish) to the message arriving,
and separately from publish to arrival.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from typing import Any

import _env  # noqa: F401  (environment, Redis, database)
import aiohttp
import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import Client

from console.live import publish
from console.models import Cluster
from console.services.inventory import demo_seed
from monitoring.ingest import NodeResult, ingest_round
from tests.factories import free_port, make_user
from tests.monitoring.samples import agent_sample


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "console.serve",
        "console.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(argv, cwd=_env.ROOT, env=dict(os.environ))
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("uvicorn did not come up")


async def main_async(clients: int, rounds: int) -> None:
    await sync_to_async(demo_seed)()
    cluster = await sync_to_async(Cluster.objects.get)(name="qwen35-prod")
    nodes = await sync_to_async(cluster.ranked_nodes)()
    user = await sync_to_async(make_user)("bench-viewer", "viewer")
    browser = Client()
    await sync_to_async(browser.force_login)(user)
    cookie = browser.cookies[settings.SESSION_COOKIE_NAME].value
    proc, base = await asyncio.to_thread(start_server)
    try:
        async with aiohttp.ClientSession(
            cookies={settings.SESSION_COOKIE_NAME: cookie}
        ) as session:
            sockets = [
                await session.ws_connect(
                    f"{base.replace('http', 'ws')}/ws/clusters/{cluster.pk}/",
                    headers={"Origin": base},
                )
                for _ in range(clients)
            ]
            for ws in sockets:
                assert (await ws.receive_json())["type"] == "hello"
            ingest_lat: list[float] = []
            publish_lat: list[float] = []
            samples = [NodeResult(n.pk, sample=agent_sample(n.name)) for n in nodes]

            async def measure(expect: str, action: Any) -> list[float]:
                """Listen on every socket first, then run ``action`` in a thread; seconds until each socket got ``expect``."""

                async def one(ws: aiohttp.ClientWebSocketResponse) -> float:
                    while True:
                        msg = await ws.receive_json(timeout=10)
                        if msg["type"] == expect:
                            return time.perf_counter()

                waiters = [asyncio.create_task(one(ws)) for ws in sockets]
                await asyncio.sleep(0)
                started = time.perf_counter()
                await asyncio.to_thread(action)
                return [t - started for t in await asyncio.gather(*waiters)]

            group = f"cluster-{cluster.pk}"
            for _ in range(rounds):
                ingest_lat += await measure(
                    "telemetry.update", lambda: ingest_round(nodes=samples, scrapes=[])
                )
                publish_lat += await measure(
                    "alert.update",
                    lambda: publish(group, "alert.update", {"bench": True}),
                )
            for ws in sockets:
                await ws.close()
            await asyncio.sleep(
                1
            )  # let the server finish the consumers' group_discard before it stops
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    print(
        f"{clients} WebSocket clients, {rounds} rounds (4 nodes x 8 NPUs per round), uvicorn + Redis channel layer"
    )
    for label, values in (
        ("ingest_round start → received", ingest_lat),
        ("publish → received", publish_lat),
    ):
        print(
            f"  {label:<32} p50 {_env.percentile(values, 0.5) * 1000:7.2f} ms   p99 {_env.percentile(values, 0.99) * 1000:7.2f} ms"
            f"   (n={len(values)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main_async(args.clients, args.rounds))


if __name__ == "__main__":
    main()

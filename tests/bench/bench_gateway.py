"""Gateway overhead: the same streams sent to the sim engine directly and through the
console's /v1 gateway.

    .venv/bin/python tests/bench/bench_gateway.py [--tokens 128] [--rounds 2]
        [--scale 0.2]

Real parts: a sim vLLM engine (engine.sim.vllm, 1 node, DP1), uvicorn serving
console.asgi with the gateway in front of it, the bundled Redis (rate limits), a
SQLite database (keys, usage). At 1, 16 and 64 concurrent streaming chat
completions, direct and gateway runs alternate in one process; the table prints
TTFT p50/p99 (request sent -> first content chunk), relayed tokens/s (all streams'
content chunks / wall time), the gateway's added TTFT, and the ratio gateway/direct.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

import _env  # noqa: F401  (environment, Redis, database)
import httpx
from bench_push import start_server

from console.engine_auth import engine_api_key, engine_headers
from console.gateway.services import apikey_create
from console.models import ClusterState, Node
from tests.factories import free_port, make_cluster, make_profile

MODEL = "bench-model"


def start_engine(scale: float) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "SIM_VLLM_VERSION": "0.33.0",
        "SIM_TIME_SCALE": str(scale),
        "SIM_LOAD_S": "0.1",
        "PYTHONPATH": str(_env.ROOT),
        # the engine requires the cluster's key, as a console-started one does
        "VLLM_API_KEY": engine_api_key("bench") or "",
    }
    argv = [
        sys.executable,
        "-m",
        "engine.sim.vllm",
        "serve",
        "/data/models/bench",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        MODEL,
        "--max-model-len",
        "16384",
        "--max-num-seqs",
        "256",
    ]
    proc = subprocess.Popen(argv, cwd=_env.ROOT, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("sim engine did not become healthy")


async def one_stream(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], tokens: int
) -> tuple[float, int]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Benchmark the gateway."}],
        "max_tokens": tokens,
        "ignore_eos": True,
        "stream": True,
    }
    started = time.perf_counter()
    ttft, pieces = 0.0, 0
    async with client.stream(
        "POST", f"{url}/v1/chat/completions", json=body, headers=headers
    ) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if (
                line.startswith("data: ")
                and '"content": "' in line
                and '"content": ""' not in line
            ):
                if pieces == 0:
                    ttft = time.perf_counter() - started
                pieces += 1
    return ttft, pieces


async def batch(
    url: str, headers: dict[str, str], concurrency: int, count: int, tokens: int
) -> dict[str, float]:
    limits = httpx.Limits(
        max_connections=concurrency, max_keepalive_connections=concurrency
    )
    async with httpx.AsyncClient(timeout=300, limits=limits, trust_env=False) as client:
        sem = asyncio.Semaphore(concurrency)

        async def run() -> tuple[float, int]:
            async with sem:
                return await one_stream(client, url, headers, tokens)

        started = time.perf_counter()
        results = await asyncio.gather(*(run() for _ in range(count)))
        wall = time.perf_counter() - started
    ttfts = [r[0] * 1000 for r in results]
    return {
        "p50": _env.percentile(ttfts, 0.5),
        "p99": _env.percentile(ttfts, 0.99),
        "tps": sum(r[1] for r in results) / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="streams per concurrency level = rounds x concurrency (min 8)",
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=0.2,
        help="SIM_TIME_SCALE of the engine (1.0 = modelled NPU speed)",
    )
    args = parser.parse_args()

    engine, engine_url = start_engine(args.scale)
    os.environ["GATEWAY_USAGE_FLUSH_S"] = "5"
    server, gateway_url = start_server()
    try:
        profile = make_profile(
            name="bench",
            served_model_name=MODEL,
            vllm_version="0.33.0",
            data_parallel_size=1,
        )
        cluster = make_cluster(name="bench", nodes=1, profile=profile)
        port = int(engine_url.rsplit(":", 1)[1])
        Node.objects.filter(cluster=cluster, rank=0).update(
            management_ip="127.0.0.1", api_port=port
        )
        cluster.state = ClusterState.RUNNING
        cluster.save(update_fields=["state"])
        _, secret = apikey_create(
            name="bench", user=None, rpm=1_000_000, tpm=1_000_000_000
        )
        auth = {"Authorization": f"Bearer {secret}"}
        # Warm up both paths (connections, first queries).
        asyncio.run(batch(gateway_url, auth, 4, 8, 8))
        asyncio.run(batch(engine_url, engine_headers("bench"), 4, 8, 8))
        print(f"{args.tokens} tokens per stream, SIM_TIME_SCALE={args.scale}")
        head = ["streams", "TTFT p50 ms direct/gw", "TTFT p99 ms direct/gw"]
        head += [
            "added p50/p99 ms",
            "tok/s direct/gw",
            "ratio gw/direct: p50 p99 tok/s",
        ]
        print(" | ".join(head))
        for concurrency in (1, 16, 64):
            count = max(8, args.rounds * concurrency)
            d = asyncio.run(
                batch(
                    engine_url, engine_headers("bench"), concurrency, count, args.tokens
                )
            )
            g = asyncio.run(batch(gateway_url, auth, concurrency, count, args.tokens))
            cells = [
                f"{concurrency:>7}",
                f"{d['p50']:>9.1f} / {g['p50']:>9.1f}",
                f"{d['p99']:>9.1f} / {g['p99']:>9.1f}",
                f"{g['p50'] - d['p50']:>7.1f} / {g['p99'] - d['p99']:>7.1f}",
                f"{d['tps']:>7.0f} / {g['tps']:>7.0f}",
                f"{g['p50'] / d['p50']:.2f} {g['p99'] / d['p99']:.2f} "
                f"{g['tps'] / d['tps']:.2f}",
            ]
            print(" | ".join(cells))
    finally:
        for proc in (server, engine):
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()

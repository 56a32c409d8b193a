"""Gateway overhead: the same streams sent to the sim engine directly and through the
console's /v1 gateway.

    .venv/bin/python tests/bench/bench_gateway.py [--tokens 128] [--rounds 4]
        [--scale 0.2] [--workers 1]

Real parts: a sim vLLM engine (engine.sim.vllm, 1 node, DP1), uvicorn serving
console.asgi with the gateway in front of it (``--workers`` processes), the bundled
Redis (rate limits, usage counters), a SQLite database (keys, usage). At 1, 16 and 64
concurrent streaming chat completions, direct and gateway runs alternate in one
process; the table prints, per level: TTFT p50/p99 (request sent -> first content
chunk) direct and through the gateway, the gateway's added TTFT p50/p99, relayed
tokens/s (all streams' content chunks / wall time) and their ratio gateway/direct,
and the gateway's CPU seconds per request: the CPU time (user + system, from
/proc) the uvicorn process tree spent during the gateway run, divided by the
requests of that run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import _env  # noqa: F401  (environment, Redis, database)
import httpx

from console.engine_auth import engine_api_key, engine_headers
from console.gateway.services import apikey_create
from console.models import ClusterState, Node
from tests.factories import free_port, make_cluster, make_profile

MODEL = "bench-model"
PY_SPY = os.environ.get("PY_SPY", "py-spy")


def start_server(
    workers: int, profile: str | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """uvicorn serving console.asgi with ``workers`` processes (WEB_CONCURRENCY);
    under ``py-spy record`` (raw collapsed stacks to ``profile``) when asked."""
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "console.asgi:application"]
    if profile:
        argv = [PY_SPY, "record", "--format", "raw", "-r", "100", "-o", profile, "--"]
        argv += [sys.executable, "-m", "uvicorn", "console.asgi:application"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    if workers > 1:
        argv += ["--workers", str(workers)]
    env = {**os.environ, "WEB_CONCURRENCY": str(workers)}
    proc = subprocess.Popen(argv, cwd=_env.ROOT, env=env)
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


def cpu_seconds(root: int) -> float:
    """User + system CPU seconds of process ``root`` and its live children (Linux
    /proc; the children are uvicorn's worker processes)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == root or ppid == root:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


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
        default=4,
        help="streams per concurrency level = rounds x concurrency (min 32)",
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=0.2,
        help="SIM_TIME_SCALE of the engine (1.0 = modelled NPU speed)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="uvicorn worker processes"
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="run the gateway under py-spy (PY_SPY=path) and write its collapsed "
        "stacks to FILE (gateway runs only; CPU figures then include py-spy's pauses)",
    )
    parser.add_argument(
        "--levels", default="1,16,64", help="concurrency levels, comma-separated"
    )
    args = parser.parse_args()

    engine, engine_url = start_engine(args.scale)
    os.environ["GATEWAY_USAGE_FLUSH_S"] = "5"
    server, gateway_url = start_server(args.workers, args.profile)
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
        load = os.getloadavg()
        print(
            f"{args.tokens} tokens per stream, SIM_TIME_SCALE={args.scale}, "
            f"{args.workers} gateway process(es), {os.cpu_count()} cores, "
            f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        )
        head = ["streams", "reqs", "TTFT p50 ms direct/gw", "TTFT p99 ms direct/gw"]
        head += ["added p50/p99 ms", "tok/s direct/gw", "ratio", "gw CPU ms/req"]
        head += ["engine CPU ms/req"]
        print(" | ".join(head))
        for concurrency in [int(x) for x in args.levels.split(",")]:
            count = max(32, args.rounds * concurrency)
            e0 = cpu_seconds(engine.pid)
            d = asyncio.run(
                batch(
                    engine_url, engine_headers("bench"), concurrency, count, args.tokens
                )
            )
            engine_cpu = (cpu_seconds(engine.pid) - e0) / count * 1000
            cpu0 = cpu_seconds(server.pid)
            g = asyncio.run(batch(gateway_url, auth, concurrency, count, args.tokens))
            cpu = (cpu_seconds(server.pid) - cpu0) / count * 1000
            cells = [
                f"{concurrency:>7}",
                f"{count:>4}",
                f"{d['p50']:>7.1f} / {g['p50']:>7.1f}",
                f"{d['p99']:>7.1f} / {g['p99']:>7.1f}",
                f"{g['p50'] - d['p50']:>6.1f} / {g['p99'] - d['p99']:>6.1f}",
                f"{d['tps']:>6.0f} / {g['tps']:>6.0f}",
                f"{g['tps'] / d['tps']:.3f}",
                f"{cpu:.2f}",
                f"{engine_cpu:.2f}",
            ]
            print(" | ".join(cells), flush=True)
        load = os.getloadavg()
        print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    finally:
        if args.profile:
            os.kill(server.pid, signal.SIGINT)  # py-spy writes its file on SIGINT
            server.wait(timeout=60)
        for proc in (server, engine):
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()

"""The load generator's own overhead: the TTFT it measures against the engine's own.

    .venv/bin/python tests/bench/bench_loadgen.py [--concurrency 1,8,32] [--prompts 64]

A sim vLLM engine (``python -m engine.sim.vllm serve``) on a free port; for each
concurrency, the sim's ``vllm bench serve`` (what the agent runs on a sim head, same
requests and measurements as vLLM's) sends ``--prompts`` requests, and the engine's
``/metrics`` is read before and after. Side by side: the client's mean TTFT against the
engine's (``vllm:time_to_first_token_seconds`` sum/count over the same requests), the
difference (HTTP, SSE parsing, the event loop), and the client's CPU seconds per request.
No thresholds: the numbers are for the README, measured in one run.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_TTFT = re.compile(
    r"^vllm:time_to_first_token_seconds_(sum|count)\{[^}]*\} (\S+)$", re.M
)


def ttft_totals(base: str) -> tuple[float, float]:
    """(sum of TTFT seconds, requests) from the engine's /metrics, over every label set."""
    text = httpx.get(f"{base}/metrics", timeout=10).text
    total = {"sum": 0.0, "count": 0.0}
    for kind, value in _TTFT.findall(text):
        total[kind] += float(value)
    return total["sum"], total["count"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=32)
    args = parser.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "engine.sim.vllm", "serve", "/models/bench", "--port", str(port),
         "--served-model-name", "bench"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        print(
            f"{'conc':>5} {'client TTFT ms':>15} {'engine TTFT ms':>15} "
            f"{'overhead ms':>12} {'client CPU ms/req':>18}"
        )
        for conc in (int(c) for c in args.concurrency.split(",")):
            out = Path(tempfile.mkdtemp()) / "r.json"
            before = ttft_totals(base)
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(
                [sys.executable, "-m", "engine.sim.vllm", "bench", "serve",
                 "--backend", "vllm", "--base-url", base, "--model", "bench",
                 "--random-input-len", str(args.input_len),
                 "--random-output-len", str(args.output_len),
                 "--num-prompts", str(args.prompts), "--max-concurrency", str(conc),
                 "--ignore-eos", "--disable-tqdm", "--save-result",
                 "--result-dir", str(out.parent), "--result-filename", out.name],
                cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            after = ttft_totals(base)
            result = json.loads(out.read_text())
            # +1: the tool's initial test request is in the engine's count too
            requests = after[1] - before[1]
            engine_ms = 1000 * (after[0] - before[0]) / max(1.0, requests)
            client_ms = result["mean_ttft_ms"]
            cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
            print(
                f"{conc:>5} {client_ms:>15.2f} {engine_ms:>15.2f} "
                f"{client_ms - engine_ms:>12.2f} {1000 * cpu / requests:>18.2f}"
            )
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()

"""The simulator's ``vllm bench serve``: vLLM's load generator, for nodes without vLLM.

A real node runs vLLM's own (vllm/benchmarks/serve.py @009e6d4a); this stands in for
it with the same flags (the subset the console sends, engine/bench_serve.py; any other
is an error, as argparse makes it), the same requests (streamed ``/v1/completions``
with ``ignore_eos`` and ``stream_options.include_usage``, ``Authorization: Bearer
$OPENAI_API_KEY`` as vllm/benchmarks/lib/endpoint_request_func.py sends), the same
measurements (TTFT at the first chunk with text, ITL between chunks, TPOT =
(E2EL − TTFT)/(output − 1), goodput against ``--goodput`` SLOs), the same printed
table and ``--save-result`` file names. Like vLLM it first sends one test request and
stops if that fails. Progress is tqdm's bar on stderr. It measures over real HTTP
against whatever server it is pointed at, so its figures are the sim engine's.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from engine import bench
from engine.sim.vllm.text import WORDS


@dataclass
class Output:
    """One request as measured on the client (vllm's RequestFuncOutput)."""

    success: bool = False
    prompt_len: int = 0
    output_tokens: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    error: str = ""
    token_times: list[float] = field(default_factory=list)
    started: float = 0.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="vllm bench serve")
    p.add_argument("--backend", default="openai", choices=["vllm", "openai"])
    p.add_argument("--base-url", required=True)
    p.add_argument("--endpoint", default="/v1/completions")
    p.add_argument("--model", required=True)
    p.add_argument("--tokenizer")
    p.add_argument("--dataset-name", default="random", choices=["random"])
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=128)
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--burstiness", type=float, default=1.0)
    p.add_argument("--goodput", nargs="+")
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--percentile-metrics", default="ttft,tpot,itl")
    p.add_argument("--metric-percentiles", default="99")
    p.add_argument("--save-result", action="store_true")
    p.add_argument("--result-dir")
    p.add_argument("--result-filename")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--label")
    p.add_argument("--disable-tqdm", action="store_true")
    args = p.parse_args(argv)
    if args.max_concurrency is not None and args.max_concurrency <= 0:
        p.error("--max-concurrency must be greater than 0")
    return args


def _prompts(n: int, length: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    # the sim's tokenizer counts words, so `length` words are `length` prompt tokens
    return [" ".join(rng.choice(WORDS) for _ in range(length)) for _ in range(n)]


async def _request(
    session: aiohttp.ClientSession, args: argparse.Namespace, prompt: str, length: int
) -> Output:
    out = Output(prompt_len=length)
    body = {
        "model": args.model,
        "prompt": prompt,
        "max_tokens": args.random_output_len,
        "temperature": 0.0,
        "stream": True,
        "ignore_eos": args.ignore_eos,
        "stream_options": {"include_usage": True},
    }
    headers = {"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY')}"}
    start = out.started = time.perf_counter()
    last = start
    try:
        async with session.post(
            args.base_url + args.endpoint, json=body, headers=headers
        ) as resp:
            if resp.status != 200:
                out.error = f"HTTP {resp.status}: {(await resp.text())[:200]}"
                return out
            async for raw in resp.content:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                now = time.perf_counter()
                if chunk.get("choices") and chunk["choices"][0].get("text"):
                    if not out.ttft:
                        out.ttft = now - start
                    else:
                        out.itl.append(now - last)
                    out.token_times.append(now)
                    last = now
                if chunk.get("usage"):
                    out.output_tokens = int(chunk["usage"]["completion_tokens"])
        out.latency = time.perf_counter() - start
        out.success = bool(out.ttft)
        if not out.success:
            out.error = "no text in the stream"
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    return out


class Bar:
    """tqdm's bar on stderr (``  37%|███▋      | 37/100 [00:05<00:08]``)."""

    def __init__(self, total: int, off: bool) -> None:
        self.total, self.done, self.off, self.t0 = total, 0, off, time.monotonic()

    def update(self) -> None:
        self.done += 1
        if self.off:
            return
        pct = 100 * self.done // max(1, self.total)
        filled = "█" * (pct // 10)
        spent = time.monotonic() - self.t0
        sys.stderr.write(
            f"\r{pct:3d}%|{filled:<10}| {self.done}/{self.total} [{spent:05.1f}s]"
        )
        sys.stderr.flush()


async def _arrivals(n: int, rate: float, burstiness: float, rng: random.Random):  # type: ignore[no-untyped-def]
    """Request i's send time: all at once for inf, else gamma intervals of mean 1/rate
    (vllm serve.py get_request: shape = burstiness, scale = 1/(rate·burstiness))."""
    for i in range(n):
        yield i
        if math.isfinite(rate) and i < n - 1:
            await asyncio.sleep(rng.gammavariate(burstiness, 1.0 / (rate * burstiness)))


async def run(args: argparse.Namespace) -> tuple[list[Output], float]:
    prompts = _prompts(args.num_prompts, args.random_input_len, args.seed)
    limit = asyncio.Semaphore(args.max_concurrency or args.num_prompts)
    timeout = aiohttp.ClientTimeout(total=6 * 3600)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        print("Starting initial single prompt test run...")
        test = await _request(session, args, prompts[0], args.random_input_len)
        if not test.success:
            raise RuntimeError(
                "Initial test run failed - Please make sure benchmark arguments "
                f"are correctly specified. Error: {test.error}"
            )
        print("Initial test run completed.")
        bar = Bar(args.num_prompts, args.disable_tqdm)
        rng = random.Random(args.seed)

        async def one(i: int) -> Output:
            async with limit:
                out = await _request(session, args, prompts[i], args.random_input_len)
            bar.update()
            return out

        t0 = time.perf_counter()
        tasks = []
        async for i in _arrivals(
            args.num_prompts, args.request_rate, args.burstiness, rng
        ):
            tasks.append(asyncio.create_task(one(i)))
        outputs = list(await asyncio.gather(*tasks))
        duration = time.perf_counter() - t0
    if not args.disable_tqdm:
        sys.stderr.write("\n")
    return outputs, duration


def _percentile(values: list[float], p: float) -> float:
    """numpy.percentile's default (linear interpolation), which vLLM uses."""
    if not values:
        return 0.0
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _goodput(args: argparse.Namespace) -> dict[str, float]:
    slo: dict[str, float] = {}
    for pair in args.goodput or []:
        name, _, value = pair.partition(":")
        if name not in ("ttft", "tpot", "e2el") or not value:
            raise SystemExit(f"Invalid metric name found, {pair}")
        slo[name] = float(value)
    return slo


def _peaks(outputs: list[Output]) -> tuple[float, int]:
    """Peak output tokens in any whole second, and the requests in flight then."""
    times = [t for o in outputs for t in o.token_times]
    if not times:
        return 0.0, 0
    t0 = min(o.started for o in outputs)
    buckets: dict[int, int] = {}
    for t in times:
        buckets[int(t - t0)] = buckets.get(int(t - t0), 0) + 1
    second, tokens = max(buckets.items(), key=lambda kv: kv[1])
    mid = t0 + second + 0.5
    flying = sum(1 for o in outputs if o.started <= mid <= o.started + o.latency)
    return float(tokens), flying


def metrics(
    args: argparse.Namespace, outputs: list[Output], duration: float
) -> dict[str, Any]:
    """The result dict under vLLM's names (serve.py calculate_metrics and benchmark())."""
    ok = [o for o in outputs if o.success]
    ttfts = [o.ttft for o in ok]
    tpots = [
        (o.latency - o.ttft) / (o.output_tokens - 1) for o in ok if o.output_tokens > 1
    ]
    itls = [x for o in ok for x in o.itl]
    e2els = [o.latency for o in ok]
    total_in = sum(o.prompt_len for o in ok)
    total_out = sum(o.output_tokens for o in ok)
    slo = _goodput(args)
    good = 0
    for o in ok:
        tpot = (o.latency - o.ttft) / max(1, o.output_tokens - 1)
        seen = {"ttft": o.ttft, "tpot": tpot, "e2el": o.latency}
        if all(seen[k] * 1000 <= v for k, v in slo.items()):
            good += 1
    peak_tps, peak_flying = _peaks(ok)
    result: dict[str, Any] = {
        "duration": duration,
        "completed": len(ok),
        "failed": len(outputs) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration,
        "request_goodput": good / duration if slo else None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "max_output_tokens_per_s": peak_tps,
        "max_concurrent_requests": peak_flying,
    }
    wanted = args.percentile_metrics.split(",")
    pcts = [float(p) for p in args.metric_percentiles.split(",")]
    for name, values in (
        ("ttft", ttfts),
        ("tpot", tpots),
        ("itl", itls),
        ("e2el", e2els),
    ):
        if name not in wanted:
            continue
        ms = [v * 1000 for v in values]
        result[f"mean_{name}_ms"] = statistics.fmean(ms) if ms else 0.0
        result[f"median_{name}_ms"] = statistics.median(ms) if ms else 0.0
        result[f"std_{name}_ms"] = statistics.pstdev(ms) if ms else 0.0
        for p in pcts:
            word = str(int(p)) if int(p) == p else str(p)
            result[f"p{word}_{name}_ms"] = _percentile(ms, p)
    return result


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    # as vLLM's bench serve does before it sends a request ("Avoid GC processing
    # 'static' data - reduce pause times", vllm/benchmarks/serve.py)
    gc.collect()
    gc.freeze()
    try:
        outputs, duration = asyncio.run(run(args))
    except RuntimeError as exc:
        sys.stderr.write(f"ValueError: {exc}\n")
        return 1
    result = metrics(args, outputs, duration)
    figures = {k: v for k, v in result.items() if not k.endswith("_ms")}
    latency = {k: v for k, v in result.items() if k.endswith("_ms")}
    print(bench.format_table(figures, latency, max_concurrency=args.max_concurrency))
    if args.save_result:
        now = datetime.now()
        saved = {
            "date": now.strftime("%Y%m%d-%H%M%S"),
            "endpoint_type": args.backend,
            "backend": args.backend,
            "label": args.label,
            "model_id": args.model,
            "tokenizer_id": args.tokenizer or args.model,
            "num_prompts": args.num_prompts,
            "request_rate": args.request_rate
            if math.isfinite(args.request_rate)
            else "inf",
            "burstiness": args.burstiness,
            "max_concurrency": args.max_concurrency,
            **result,  # request_goodput is null without --goodput, as in vLLM
        }
        name = args.result_filename or (
            f"{args.label or args.backend}-{args.request_rate}qps-"
            f"{args.model.split('/')[-1]}-{now.strftime('%Y%m%d-%H%M%S')}.json"
        )
        path = Path(args.result_dir or ".") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(saved))
    return 0

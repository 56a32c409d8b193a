"""Gateway overhead: the same streams sent to the sim engine directly, through the
console's /v1 gateway and (for reference) through nginx.

    .venv/bin/python tests/bench/bench_gateway.py [--tokens 128] [--rounds 8]
        [--repeat 3] [--scale 0.2] [--workers 1] [--stream-interval 1] [--levels 1,16,64]
        [--spread 0.5] [--prompt-kb 32] [--no-nginx] [--floor] [--profile FILE]

Real parts: a sim vLLM engine (engine.sim.vllm, 1 node, DP1), uvicorn (``python -m
console.serve``, as the web unit runs it) serving console.asgi with the gateway in
front of it (``--workers`` processes), the bundled Redis (rate limits, usage
counters), a SQLite database (keys, usage), and Debian's nginx as a plain reverse
proxy to the same engine (``proxy_buffering off``, pooled upstream connections: what
a relay written in C costs on this machine; `make deploy-tools` installs it). At
each concurrency level the direct, gateway and nginx runs take turns (``--repeat``
turns, each ``--rounds`` x streams requests) in one process with the same client
(aiohttp, one pooled session per run); the table prints, per level, over the turns
pooled: TTFT p50/p99 (request sent -> first content chunk) direct and through the
gateway, the gateway's added TTFT p50/p99 (and each turn's added p50 on its own: how
much of it is the luck of the turn), nginx's added TTFT (the floor of any relay in
this set-up), the engine's own mean TTFT in each run (its
vllm:time_to_first_token_seconds histogram: arrival at the engine -> first token;
what of the added TTFT happened inside the engine rather than on the gateway's
path), the mean TTFT added outside the engine (each run's mean client TTFT less the
engine's own mean, less the same for the direct run: gateway / nginx / floor; unlike
the added p50 it does not move with the engine steps a burst of arrivals falls
into), relayed tokens/s and the ratio gateway/direct, and CPU per request (user +
system from /proc, over the run, divided by its requests) of the gateway process
tree (with the share spent in the kernel: socket reads and writes), the engine
(during the direct run), nginx (during its run) and this client.

``--stream-interval N`` starts the engine with vLLM's ``--stream-interval`` (an
event carries up to N tokens; vLLM sends the first token at once). ``--tokens 1``
measures the fixed cost per request (one content event); ``--prompt-kb N`` sends
N KB of Chinese text as the prompt (documents quoted into a question, as the
platform's applications do), so that the cost of reading a request body shows.

Every stream of a level asks for the same ``--tokens`` by default, so the streams
run in lockstep: they all finish in one engine step and their clients send the next
requests as one burst (the worst case for anything on the path, which handles the
burst one request at a time). ``--spread F`` gives each stream of a run a length
drawn from tokens x [1-F, 1+F] (the same lengths in every run), so finishes and
arrivals spread out the way requests of different lengths do.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import _env  # noqa: F401  (environment, Redis, database)
import aiohttp
import httpx

from console.engine_auth import engine_api_key, engine_headers
from console.gateway.services import apikey_create
from console.models import ClusterState, Node
from tests.factories import free_port, make_cluster, make_profile

MODEL = "bench-model"
PY_SPY = os.environ.get("PY_SPY", "py-spy")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

# nginx as a plain streaming reverse proxy: no buffering, pooled HTTP/1.1 upstream
# connections (nginx docs: ngx_http_upstream_module "keepalive",
# ngx_http_proxy_module "proxy_buffering").
NGINX_CONF = """\
daemon off;
user root;
pid {root}/nginx.pid;
error_log {root}/error.log;
worker_processes 1;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    upstream engine {{ server 127.0.0.1:{engine_port}; keepalive 256; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://engine;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""


def wait_ready(proc: subprocess.Popen[bytes], url: str, what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"{what} did not come up")


def start_server(
    workers: int, profile: str | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """uvicorn serving console.asgi with ``workers`` processes (WEB_CONCURRENCY);
    under ``py-spy record`` (raw collapsed stacks to ``profile``; PY_SPY_ARGS adds
    options, e.g. --native; PY_SPY_RATE samples per second, 100) when asked."""
    port = free_port()
    argv = [sys.executable, "-m", "console.serve", "console.asgi:application"]
    if profile:
        spy = [PY_SPY, "record", *os.environ.get("PY_SPY_ARGS", "").split()]
        rate = os.environ.get("PY_SPY_RATE", "100")
        argv = [*spy, "--format", "raw", "-r", rate, "-o", profile, "--", *argv]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    if workers > 1:
        argv += ["--workers", str(workers)]
    env = {**os.environ, "WEB_CONCURRENCY": str(workers)}
    proc = subprocess.Popen(argv, cwd=_env.ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    wait_ready(proc, f"{base}/healthz", "uvicorn")
    return proc, base


def start_nginx(engine_port: int) -> tuple[subprocess.Popen[bytes], str, str]:
    root = tempfile.mkdtemp(prefix="bench-nginx-")
    port = free_port()
    conf = Path(root) / "nginx.conf"
    conf.write_text(NGINX_CONF.format(root=root, port=port, engine_port=engine_port))
    proc = subprocess.Popen([NGINX, "-c", str(conf), "-p", root])
    base = f"http://127.0.0.1:{port}"
    wait_ready(proc, f"{base}/health", "nginx")
    return proc, base, root


def start_floor(engine_port: int) -> tuple[subprocess.Popen[bytes], str]:
    """tests/bench/relay_floor.py: a bare Python relay (the floor of any)."""
    port = free_port()
    argv = [sys.executable, str(Path(__file__).with_name("relay_floor.py"))]
    argv += ["--port", str(port), "--upstream", f"127.0.0.1:{engine_port}"]
    proc = subprocess.Popen(argv, cwd=_env.ROOT)
    base = f"http://127.0.0.1:{port}"
    wait_ready(proc, f"{base}/health", "relay_floor")
    return proc, base


def cpu_seconds(root: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``root`` and its live children (Linux
    /proc; the children are uvicorn's or nginx's worker processes)."""
    tick = os.sysconf("SC_CLK_TCK")
    user = system = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == root or ppid == root:
            user += int(fields[11]) / tick
            system += int(fields[12]) / tick
    return user, system


def engine_ttft(url: str) -> tuple[float, float]:
    """(sum, count) of the engine's own TTFT histogram (arrival at the engine -> first
    token), vllm:time_to_first_token_seconds on its /metrics (vLLM: iteration
    timestamp - req_stats.arrival_time, vllm/v1/metrics/stats.py
    IterationStats.update_from_output; the sim: engine.sim.vllm.runtime)."""
    total = count = 0.0
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("vllm:time_to_first_token_seconds_sum"):
            total += float(line.split()[-1])
        elif line.startswith("vllm:time_to_first_token_seconds_count"):
            count += float(line.split()[-1])
    return total, count


def own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def start_engine(scale: float, interval: int) -> tuple[subprocess.Popen[bytes], str]:
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
        "--stream-interval",
        str(interval),
    ]
    log = open(os.environ.get("BENCH_ENGINE_LOG", os.devnull), "wb")  # noqa: SIM115
    proc = subprocess.Popen(argv, cwd=_env.ROOT, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    wait_ready(proc, f"{url}/health", "sim engine")
    return proc, url


def lengths(tokens: int, spread: float, count: int) -> list[int]:
    """Each stream's max_tokens: ``tokens``, or drawn from tokens x [1-spread,
    1+spread] with a fixed seed (the same lengths for the direct, gateway and nginx
    runs)."""
    rng = random.Random(count)
    low, high = max(1, round(tokens * (1 - spread))), round(tokens * (1 + spread))
    return [rng.randint(low, max(low, high)) for _ in range(count)]


PROMPT = "Benchmark the gateway."
# --prompt-kb: a long prompt of the platform's kind (documents quoted into a question)
PASSAGE = "根据省政务服务事项办理指南，申请人应当提交身份证明和相关材料。"


def prompt_of(kb: int) -> str:
    """``kb`` KB of UTF-8 text, then the question (the short prompt for 0)."""
    if not kb:
        return PROMPT
    size = len(PASSAGE.encode())
    return PASSAGE * (kb * 1024 // size + 1) + PROMPT


async def one_stream(
    session: aiohttp.ClientSession,
    url: str,
    headers: dict[str, str],
    tokens: int,
    prompt: str = PROMPT,
) -> tuple[float, int]:
    """(TTFT, content events) of one streamed chat completion."""
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": tokens,
        "ignore_eos": True,
        "stream": True,
    }
    started = time.perf_counter()
    ttft, events = 0.0, 0
    async with session.post(
        f"{url}/v1/chat/completions", json=body, headers=headers
    ) as resp:
        resp.raise_for_status()
        async for line in resp.content:
            if line.startswith(b"data: ") and b'"content": "' in line:
                if b'"content": ""' in line:
                    continue  # the role chunk
                if events == 0:
                    ttft = time.perf_counter() - started
                events += 1
    return ttft, events


async def batch(
    url: str,
    headers: dict[str, str],
    concurrency: int,
    sizes: list[int],
    prompt: str = PROMPT,
) -> Run:
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, trust_env=False
    ) as session:
        sem = asyncio.Semaphore(concurrency)

        async def run(tokens: int) -> tuple[float, int]:
            async with sem:
                return await one_stream(session, url, headers, tokens, prompt)

        cpu0, started = own_cpu(), time.perf_counter()
        results = await asyncio.gather(*(run(n) for n in sizes))
        wall, cpu = time.perf_counter() - started, own_cpu() - cpu0
    if any(r[1] == 0 for r in results):
        raise SystemExit(f"{url}: a stream carried no content")
    run_ = Run()
    run_.ttfts = [r[0] * 1000 for r in results]
    run_.tokens = sum(sizes)  # ignore_eos: every stream carries its max_tokens
    run_.events = sum(r[1] for r in results)
    run_.wall, run_.client_cpu = wall, cpu
    return run_


@dataclass
class Run:
    """What the runs of one target at one level added up to (pooled over the
    repetitions)."""

    ttfts: list[float] = field(default_factory=list)  # ms, one per stream
    tokens: int = 0
    events: int = 0
    wall: float = 0.0
    client_cpu: float = 0.0  # s
    user: float = 0.0  # s, the measured process tree
    system: float = 0.0
    engine_ttft: tuple[float, float] = (0.0, 0.0)  # (sum s, count)

    def add(self, other: Run) -> None:
        self.ttfts += other.ttfts
        self.tokens += other.tokens
        self.events += other.events
        self.wall += other.wall
        self.client_cpu += other.client_cpu
        self.user += other.user
        self.system += other.system
        self.engine_ttft = (
            self.engine_ttft[0] + other.engine_ttft[0],
            self.engine_ttft[1] + other.engine_ttft[1],
        )

    def p(self, q: float) -> float:
        return _env.percentile(self.ttfts, q)

    @property
    def tps(self) -> float:
        return self.tokens / self.wall

    def per_request(self, seconds: float) -> float:
        return seconds / len(self.ttfts) * 1000

    @property
    def cpu(self) -> float:
        """CPU ms per request of the measured process tree."""
        return self.per_request(self.user + self.system)

    @property
    def sys_share(self) -> float:
        return self.system / max(1e-9, self.user + self.system)

    @property
    def engine_mean(self) -> float:
        return self.engine_ttft[0] / max(1.0, self.engine_ttft[1]) * 1000

    @property
    def outside(self) -> float:
        """Mean ms of a request's TTFT spent outside the engine (the client's TTFT
        less the engine's own, arrival -> first token): what the path to the engine
        and back costs, whichever engine steps the requests fell into."""
        return sum(self.ttfts) / len(self.ttfts) - self.engine_mean


def measured(
    pid: int,
    engine_url: str,
    url: str,
    headers: dict[str, str],
    conc: int,
    sizes: list[int],
    prompt: str,
) -> Run:
    """One run, with the CPU process ``pid`` (and children) spent during it and the
    engine's own TTFT over it (``engine_ttft``)."""
    (u0, s0), (t0, n0) = cpu_seconds(pid), engine_ttft(engine_url)
    result = asyncio.run(batch(url, headers, conc, sizes, prompt))
    u1, s1 = cpu_seconds(pid)
    result.user, result.system = u1 - u0, s1 - s0
    t1, n1 = engine_ttft(engine_url)
    result.engine_ttft = (t1 - t0, n1 - n0)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=128, help="tokens per stream")
    parser.add_argument(
        "--rounds",
        type=int,
        default=8,
        help="streams per concurrency level = rounds x concurrency (min 32)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="turns of direct, gateway and nginx runs per level, pooled",
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
        "--stream-interval",
        type=int,
        default=1,
        help="the engine's --stream-interval (tokens per streamed event after the "
        "first)",
    )
    parser.add_argument(
        "--spread",
        type=float,
        default=0.0,
        help="stream lengths drawn from tokens x [1-F, 1+F] (0: all equal, lockstep)",
    )
    parser.add_argument(
        "--prompt-kb",
        type=int,
        default=0,
        help="a prompt of this many KB of UTF-8 text (Chinese; aiohttp sends it "
        "\\u-escaped, ~2x the bytes, as Python's OpenAI client does); 0: one short "
        "sentence",
    )
    parser.add_argument(
        "--no-nginx", action="store_true", help="skip the nginx reference runs"
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also run tests/bench/relay_floor.py (a bare Python relay: uvloop and "
        "httptools, no keys, limits or usage) as a reference",
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

    engine = server = nginx = floor = None
    try:
        # started inside the try: one that does not come up stops those before it
        engine, engine_url = start_engine(args.scale, args.stream_interval)
        engine_port = int(engine_url.rsplit(":", 1)[1])
        os.environ["GATEWAY_USAGE_FLUSH_S"] = "5"
        server, gateway_url = start_server(args.workers, args.profile)
        if not args.no_nginx:
            nginx, nginx_url, nginx_root = start_nginx(engine_port)
        if args.floor:
            floor, floor_url = start_floor(engine_port)
        profile = make_profile(
            name="bench",
            served_model_name=MODEL,
            vllm_version="0.33.0",
            data_parallel_size=1,
        )
        cluster = make_cluster(name="bench", nodes=1, profile=profile)
        Node.objects.filter(cluster=cluster, rank=0).update(
            management_ip="127.0.0.1", api_port=engine_port
        )
        cluster.state = ClusterState.RUNNING
        cluster.save(update_fields=["state"])
        _, secret = apikey_create(
            name="bench", user=None, rpm=1_000_000, tpm=1_000_000_000
        )
        auth = {"Authorization": f"Bearer {secret}"}
        direct = engine_headers("bench")
        # Warm up every path (connections, first queries).
        asyncio.run(batch(gateway_url, auth, 4, [8] * 8))
        asyncio.run(batch(engine_url, direct, 4, [8] * 8))
        if nginx:
            asyncio.run(batch(nginx_url, direct, 4, [8] * 8))
        if floor:
            asyncio.run(batch(floor_url, direct, 4, [8] * 8))
        # The client's startup heap (Django, the factories) out of the collector's
        # walks, as vLLM's own serving benchmark does before it measures ("Avoid GC
        # processing 'static' data - reduce pause times": gc.collect(); gc.freeze(),
        # vllm/benchmarks/serve.py): a full collection here stalled every stream in
        # flight and its TTFTs, whichever path they took.
        gc.collect()
        gc.freeze()
        load = os.getloadavg()
        print(
            f"{args.tokens} tokens per stream (spread {args.spread:g}), "
            f"--stream-interval {args.stream_interval}"
            f", SIM_TIME_SCALE={args.scale}, {args.workers} gateway process(es), "
            f"prompt {len(prompt_of(args.prompt_kb).encode()) // 1024} KB, "
            f"{os.cpu_count()} cores, load average before: "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        )
        head = ["streams", "reqs", "events/req", "TTFT p50 ms direct/gw"]
        head += ["TTFT p99 ms direct/gw", "added p50/p99 ms gw", "p50 by turn"]
        head += ["nginx"]
        head += [
            "engine's own TTFT mean direct/gw",
            "added mean outside engine gw/nginx/floor",
        ]
        head += ["tok/s direct/gw"]
        head += ["ratio", "CPU ms/req gw (in kernel)", "engine", "nginx", "client"]
        if floor:
            head += ["floor added p50/p99", "floor CPU"]
        print(" | ".join(head))
        for concurrency in [int(x) for x in args.levels.split(",")]:
            count = max(32, args.rounds * concurrency)
            sizes = lengths(args.tokens, args.spread, count)
            run = (concurrency, sizes, prompt_of(args.prompt_kb))
            d, g, n, f = Run(), Run(), Run(), Run()
            added: list[str] = []
            # direct, gateway and nginx in turn, --repeat times: a run's TTFTs depend
            # on how its streams fall into the engine's steps, which settles
            # differently run by run; pooled turns share that luck
            for _ in range(args.repeat):
                d1 = measured(engine.pid, engine_url, engine_url, direct, *run)
                g1 = measured(server.pid, engine_url, gateway_url, auth, *run)
                d.add(d1)
                g.add(g1)
                added.append(f"{g1.p(0.5) - d1.p(0.5):.1f}")
                if nginx:
                    n.add(measured(nginx.pid, engine_url, nginx_url, direct, *run))
                if floor:
                    f.add(measured(floor.pid, engine_url, floor_url, direct, *run))
            nginx_cpu = nginx_added = "-"
            outside = [f"{g.outside - d.outside:.1f}"]
            outside += [f"{n.outside - d.outside:.1f}" if nginx else "-"]
            outside += [f"{f.outside - d.outside:.1f}"] if floor else []
            if nginx:
                nginx_cpu = f"{n.cpu:.2f}"
                nginx_added = (
                    f"{n.p(0.5) - d.p(0.5):>6.1f} / {n.p(0.99) - d.p(0.99):>6.1f}"
                )
            cells = [
                f"{concurrency:>7}",
                f"{len(g.ttfts):>4}",
                f"{g.events / len(g.ttfts):.0f}",
                f"{d.p(0.5):>7.1f} / {g.p(0.5):>7.1f}",
                f"{d.p(0.99):>7.1f} / {g.p(0.99):>7.1f}",
                f"{g.p(0.5) - d.p(0.5):>6.1f} / {g.p(0.99) - d.p(0.99):>6.1f}",
                " ".join(added),
                nginx_added,
                f"{d.engine_mean:>5.1f} / {g.engine_mean:>5.1f}",
                " / ".join(outside),
                f"{d.tps:>6.0f} / {g.tps:>6.0f}",
                f"{g.tps / d.tps:.3f}",
                f"{g.cpu:.2f} ({g.sys_share:.0%})",
                f"{d.cpu:.2f}",
                nginx_cpu,
                f"{g.per_request(g.client_cpu):.2f}",
            ]
            if floor:
                cells.append(
                    f"{f.p(0.5) - d.p(0.5):>6.1f} / {f.p(0.99) - d.p(0.99):>6.1f}"
                    f" | {f.cpu:.2f} ({f.sys_share:.0%})"
                )
            print(" | ".join(cells), flush=True)
        load = os.getloadavg()
        print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    finally:
        if args.profile and server is not None:
            os.kill(server.pid, signal.SIGINT)  # py-spy writes its file on SIGINT
            server.wait(timeout=60)
        for proc in (server, engine, nginx, floor):
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        if nginx:
            shutil.rmtree(nginx_root, ignore_errors=True)


if __name__ == "__main__":
    main()

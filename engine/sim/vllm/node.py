"""One simulated `vllm serve` process: the head (API server + engines) or headless.

Environment: ``SIM_TIME_SCALE`` (1.0; multiplies every simulated duration),
``SIM_LOAD_S`` (3 s model load), ``SIM_HEADLESS_TIMEOUT_S`` (300 s × scale, vLLM's
5-minute handshake timeout), ``SIM_DEAD_EXIT_S`` (1 s from a dead rank to the head's
exit), ``SIM_STATE_DIR`` + ``SIM_NODE``/``NODE_NAME`` (node state, faults, reporting),
``HCCL_INTRA_ROCE_ENABLE`` ("1" ⇒ intra-server traffic on RoCE).
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import json
import os
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from engine.sim import state
from engine.sim.vllm.cli import ServeArgs
from engine.sim.vllm.cluster import (
    HANDSHAKE_AT,
    HEARTBEAT_S,
    HandshakeTimeout,
    HeadRendezvous,
    Peer,
    encode,
    headless_connect,
)
from engine.sim.vllm.logs import VllmLog, uvicorn
from engine.sim.vllm.metrics import EngineMetrics
from engine.sim.vllm.model import ModelParams
from engine.sim.vllm.runtime import LinkState, SimEngine
from engine.sim.vllm.server import ServerState, build_app

# vLLM's STARTUP_POLL_PERIOD_MS (vllm/v1/engine/utils.py), in simulated seconds
STARTUP_POLL_S = 10.0


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise SystemExit(
            f"{name}={raw!r} is not a number; set it to seconds (e.g. 0.05)"
        ) from None


@dataclass
class Env:
    """Simulator settings from the environment."""

    time_scale: float = 1.0
    load_s: float = 3.0
    headless_timeout_s: float = 300.0
    dead_exit_s: float = 1.0
    link_mode: str = "hccs"
    node_dir: Path | None = None
    node: str = field(
        default_factory=lambda: (
            os.environ.get("SIM_NODE") or os.environ.get("NODE_NAME") or ""
        )
    )

    @classmethod
    def from_env(cls) -> Env:
        scale = _env_float("SIM_TIME_SCALE", 1.0)
        d = state.node_dir() if os.environ.get("SIM_STATE_DIR") and cls().node else None
        return cls(
            time_scale=scale,
            load_s=_env_float("SIM_LOAD_S", 3.0),
            headless_timeout_s=_env_float("SIM_HEADLESS_TIMEOUT_S", 300.0 * scale),
            dead_exit_s=_env_float("SIM_DEAD_EXIT_S", 1.0),
            link_mode="roce"
            if os.environ.get("HCCL_INTRA_ROCE_ENABLE") == "1"
            else "hccs",
            node_dir=d,
        )

    def link(self, faults: state.Faults) -> tuple[str, float]:
        """(link the intra-server traffic really uses, HCCS loss it suffers).

        HCCL_INTRA_ROCE_ENABLE=1 moves traffic to RoCE only where the server model
        honours it (engine/capabilities.py: a Box16 does, the demo's 800T A2 does not);
        HCCS loss slows only traffic that is still on HCCS.
        """
        honours = (
            self.node_dir is None or state.load_config(self.node_dir).honours_switch()
        )
        mode = "roce" if self.link_mode == "roce" and honours else "hccs"
        return mode, faults.hccs_loss_pct if mode == "hccs" else 0.0

    def faults(self) -> state.Faults:
        return (
            state.load_faults(self.node_dir)
            if self.node_dir is not None
            else state.Faults()
        )

    def hbm_total_mb(self) -> int:
        return (
            state.load_config(self.node_dir).hbm_total_mb
            if self.node_dir is not None
            else 65536
        )


class Reporter:
    """EngineReporter.report every 0.5 s when SIM_STATE_DIR is set, else a no-op."""

    def __init__(self, env: Env, args: ServeArgs, role: str) -> None:
        self.env = env
        self.hbm_mb = int(args.gpu_memory_utilization * env.hbm_total_mb())
        self.rep = None
        if env.node_dir is not None:
            rank = args.my_ranks[0] if args.my_ranks else 0
            self.rep = state.EngineReporter(
                env.node_dir,
                pid=os.getpid(),
                rank=rank,
                role=role,
                link_mode=env.link_mode,
            )

    def report(self, phase: str, load: float) -> None:
        if self.rep is not None:
            hbm = (
                self.hbm_mb
                if phase in ("ready", "waiting_for_ranks", "dead")
                else self.hbm_mb // 3
            )
            self.rep.report(phase=phase, load=load, hbm_used_mb=hbm)

    def close(self) -> None:
        if self.rep is not None:
            self.rep.close()


def _crash(env: Env, log: VllmLog, faults: state.Faults) -> int:
    """The crash fault: a real HCCL init failure; "once" is consumed by this start."""
    worker = f"(VllmWorker rank=0 pid={os.getpid()}) "
    log.error("multiproc_executor.py:522", "WorkerProc failed to start.")
    print(
        f"{worker}ERROR [multiproc_executor.py:522] RuntimeError: "
        "create_config:build/CMakeFiles/torch_npu.dir/"
        "compiler_depend.ts:148 HCCL function error: "
        "hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, "
        "config, &(comm->hcclComm_)), error code is 1",
        flush=True,
    )
    print(
        f"{worker}ERROR [multiproc_executor.py:522] [ERROR] (PID:{os.getpid()}, "
        "Device:0, RankID:-1) "
        "ERR02200 DIST call hccl api failed.",
        flush=True,
    )
    log.error("core.py:708", "EngineCore failed to start.")
    if faults.crash == "once" and env.node_dir is not None:
        faults.crash = None
        state.save_faults(env.node_dir, faults)
    return 1


def _start_lines(log: VllmLog, args: ServeArgs) -> None:
    log.info("api_server.py:1896", f"vLLM API server version {args.version}")
    log.info(
        "utils.py:328",
        f"non-default args: {{'model_tag': {args.model!r}, 'model': {args.model!r}}}",
    )
    log.info("config.py:1580", f"Using max model len {args.max_model_len}")


def _warn_links(log: VllmLog, links: LinkState, warned: dict[str, float]) -> None:
    """Log when a node's HCCS loss starts (or stops) stalling the group's steps."""
    for node, (_, loss) in sorted(links.by_node.items()):
        if loss == warned.get(node, 0.0):
            continue
        if loss > 0:
            # EP all-to-all runs in lockstep: one lossy node slows every DP rank
            log.warning(
                "hccl_comm.py:214",
                f"HCCS packet loss {loss:.1f}% on {node}: collective retransmits "
                "are stalling every engine step.",
            )
        else:
            log.info("hccl_comm.py:221", f"HCCS packet loss on {node} cleared.")
        warned[node] = loss


def _resolve(fut: asyncio.Future[int], code: int) -> None:
    """Set the process exit code once (the first cause wins)."""
    if not fut.done():
        fut.set_result(code)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# ---------------------------------------------------------------- head


async def run_head(args: ServeArgs, env: Env) -> int:
    """The API server process (rank 0 / node 0). Returns the exit code."""
    log = VllmLog("APIServer")
    _start_lines(log, args)
    faults = env.faults()
    reporter = Reporter(env, args, "head")
    if faults.crash:
        reporter.report("loading", 0.0)
        await asyncio.sleep(0.3 * env.time_scale)
        reporter.close()
        return _crash(env, log, faults)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    links = LinkState()
    me = env.node or "rank0"
    links.set(me, *env.link(faults))
    links.set_garbled(me, faults.garbled)
    engines = max(args.data_parallel_size, 1)
    metrics = EngineMetrics(
        model_name=args.model_name,
        engines=engines,
        max_model_len=args.max_model_len,
        version=args.version,
    )
    block = 128
    params = ModelParams(
        block_size=block,
        num_gpu_blocks=args.num_gpu_blocks_override
        or max(2 * args.max_model_len // block, 64),
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens or 8192,
        enable_prefix_caching=args.enable_prefix_caching,
    )
    engine = SimEngine(
        params=params,
        engines=engines,
        metrics=metrics,
        log=log,
        time_scale=env.time_scale,
        links=links,
    )
    flags = {"loaded": False, "dead": False, "serving": False}

    def on_peer(peer: Peer | None) -> None:
        if peer is not None:
            links.set(
                peer.node or f"rank{peer.ranks[0]}", peer.link_mode, peer.loss_pct
            )
            links.set_garbled(peer.node or f"rank{peer.ranks[0]}", peer.garbled)

    def on_dead(reason: str) -> None:
        if flags["dead"]:
            return
        flags["dead"] = True
        log.error("core_client.py:564", reason)
        log.error("async_llm.py:480", "AsyncLLM output_handler failed.")
        log.error(
            "async_llm.py:480",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an "
            "issue. "
            "See stack trace (above) for the root cause.",
        )
        loop.call_later(env.dead_exit_s, _resolve, done, 1)

    rdv: HeadRendezvous | None = None
    if args.remote_ranks:
        host, port = args.rpc_address
        rdv = HeadRendezvous(
            host=host,
            port=port,
            expected=args.remote_ranks,
            log=log,
            on_peer_change=on_peer,
            on_dead=on_dead,
            dp_handshake=not args.nnodes_mode,
        )
        try:
            await rdv.start()
        except OSError as exc:
            log.error(
                "utils.py:790",
                f"Failed to bind handshake socket tcp://{host}:{port}: {exc} "
                "(Address already in use?)",
            )
            reporter.close()
            return 1

    def healthy() -> bool:
        # /health turns 200 only after the API server's startup lines, as in vLLM
        return flags["serving"] and not flags["dead"]

    app = build_app(ServerState(args=args, engine=engine, healthy=healthy))
    # vLLM's uvicorn closes a connection idle for VLLM_HTTP_TIMEOUT_KEEP_ALIVE s, 5 by
    # default (vllm/envs.py; api_server.py passes it as timeout_keep_alive)
    keep_alive = float(os.environ.get("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "5"))
    runner = web.AppRunner(
        app, access_log=None, handle_signals=False, keepalive_timeout=keep_alive
    )
    await runner.setup()
    host = args.host or "0.0.0.0"  # vLLM binds every interface unless --host is given
    try:
        await web.TCPSite(runner, host, args.port).start()
    except OSError as exc:
        log.error(
            "api_server.py:1950",
            f"[Errno 98] error while attempting to bind on address ({host!r}, "
            f"{args.port}): {exc.strerror or 'address already in use'}",
        )
        await runner.cleanup()
        reporter.close()
        return 1
    engine.start()
    # the head's own DP engines (in --nnodes mode the remote ranks are nodes)
    own = [r for r in range(engines) if args.nnodes_mode or r not in args.remote_ranks]
    news = rdv.news if rdv is not None else asyncio.Event()
    for r in own:
        log.debug(HANDSHAKE_AT, f"HELLO from local core engine process {r}.")

    def serving() -> None:
        """vLLM starts its API server once every engine is ready, then uvicorn's lines."""
        log.info(
            "api_server.py:1971",
            f"Starting vLLM API server 0 on http://{host}:{args.port}",
        )
        for _ in range(max(args.api_server_count or 1, 1)):  # one pair per API server
            uvicorn(f"Started server process [{os.getpid()}]")
            uvicorn("Waiting for application startup.")
            uvicorn("Application startup complete.")
        uvicorn(f"Uvicorn running on http://{host}:{args.port} (Press CTRL+C to quit)")
        freeze_gc_heap()
        flags["serving"] = True

    async def load_model() -> None:
        secs = (env.load_s + faults.slow_start_s) * env.time_scale
        await asyncio.sleep(secs)
        log.info("default_loader.py:291", f"Loading weights took {secs:.2f} seconds")
        log.info(
            "core.py:222",
            "init engine (profile, create kv cache, warmup model) took 0.00 seconds",
        )
        flags["loaded"] = True
        if not args.nnodes_mode:
            for r in own:
                log.debug(HANDSHAKE_AT, f"READY from local core engine process {r}.")
            news.set()

    async def startup_poll() -> None:
        """vLLM's wait_for_engine_startup: after every poll period without a handshake
        message, DEBUG lines naming the engines not yet connected and those not yet
        ready (local = this node's, remote = the headless ranks')."""
        dp = rdv is not None and not args.nnodes_mode
        while True:
            local_ready = flags["loaded"] and (
                not args.nnodes_mode or rdv is None or rdv.all_loaded
            )
            local = 0 if local_ready else len(own)
            connect = rdv.unconnected if dp and rdv is not None else 0
            start = rdv.unready if dp and rdv is not None else 0
            if not (local or connect or start) or flags["dead"]:
                return
            try:
                await asyncio.wait_for(news.wait(), STARTUP_POLL_S * env.time_scale)
                news.clear()
                continue
            except TimeoutError:
                pass
            if connect:
                log.debug(
                    "v1/engine/utils.py:857",
                    f"Waiting for 0 local, {connect} remote core engine proc(s) to "
                    "connect.",
                )
            if local or start:
                log.debug(
                    "v1/engine/utils.py:862",
                    f"Waiting for {local} local, {start} remote core engine proc(s) "
                    "to start.",
                )

    async def report_loop() -> None:
        announced = False
        slow: dict[str, float] = {}  # node -> loss already warned about
        while True:
            f = env.faults()
            links.set(me, *env.link(f))
            links.set_garbled(me, f.garbled)
            _warn_links(log, links, slow)
            if flags["dead"]:
                phase = "dead"
            elif not flags["loaded"]:
                phase = "loading"
            elif rdv is not None and not rdv.all_loaded:
                phase = "waiting_for_ranks"
            else:
                phase = "ready"
                if not announced:
                    serving()
                    announced = True
            local = [
                r
                for r in range(engines)
                if r not in (args.remote_ranks if not args.nnodes_mode else [])
            ]
            load = sum(engine.load(r) for r in local) / max(len(local), 1)
            reporter.report(phase, load)
            if rdv is not None:
                rdv.send_load(engine.load)
            await asyncio.sleep(HEARTBEAT_S)

    def stop(signame: str) -> None:
        log.info("launcher.py:101", f"Shutting down FastAPI HTTP server. ({signame})")
        if not done.done():
            done.set_result(0)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop, sig.name)
    tasks = [
        asyncio.create_task(load_model()),
        asyncio.create_task(report_loop()),
        asyncio.create_task(startup_poll()),
    ]
    code = await done
    for t in tasks:
        t.cancel()
    if rdv is not None and code == 0:
        await rdv.shutdown()
    await engine.stop()
    await runner.cleanup()
    reporter.close()
    return code


# ---------------------------------------------------------------- headless


async def run_headless(args: ServeArgs, env: Env) -> int:
    """A headless rank: join the head, load, heartbeat; exit 0 on head shutdown."""
    ranks = args.my_ranks
    log = VllmLog(f"EngineCore_DP{ranks[0] if ranks else 0}")
    host, port = args.rpc_address
    if args.nnodes_mode:
        log.info(
            "cli/serve.py:169",
            f"Launching vLLM (v{args.version}) headless multiproc executor, "
            f"with head node address tcp://{host}:{port} for torch.distributed process "
            "group.",
        )
    else:
        log.info(
            "cli/serve.py:192",
            f"Launching {len(ranks)} data parallel engine(s) in headless mode, "
            f"with head node address tcp://{host}:{port}.",
        )
    faults = env.faults()
    reporter = Reporter(env, args, "headless")
    if faults.crash:
        reporter.report("loading", 0.0)
        await asyncio.sleep(0.3 * env.time_scale)
        reporter.close()
        return _crash(env, log, faults)
    if not _loopback(host):
        log.error(
            "core.py:708",
            f"The simulator only connects to loopback addresses; {host} is not one.",
        )
        reporter.close()
        return 1
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _resolve, done, 0)
    reporter.report("waiting_for_ranks", 0.0)
    hello = {
        "type": "hello",
        "ranks": ranks,
        "node": env.node,
        "link_mode": env.link(faults)[0],
        "hccs_loss_pct": env.link(faults)[1],
        "garbled": faults.garbled,
    }
    connect = asyncio.create_task(
        headless_connect(host, port, hello, env.headless_timeout_s)
    )
    waiters: list[asyncio.Future[object]] = [connect, done]  # type: ignore[list-item]
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    if done.done():
        connect.cancel()
        reporter.close()
        return done.result()
    try:
        reader, writer, reply = connect.result()
    except HandshakeTimeout:
        log.error("core.py:708", "EngineCore failed to start.")
        log.error(
            "core.py:708",
            "RuntimeError: Did not receive response from front-end process within 5 "
            "minutes",
        )
        reporter.close()
        return 1
    if reply.get("type") != "init":
        log.error(
            "core.py:708",
            "EngineCore failed to start: the head refused the handshake: "
            f"{reply.get('reason')}",
        )
        reporter.close()
        return 1
    log.info(
        "core.py:1067",
        f"Handshake with front-end at tcp://{host}:{port} complete; ranks {ranks}.",
    )
    current = {"load": 0.0, "loaded": False}

    async def load_and_beat() -> None:
        secs = (env.load_s + faults.slow_start_s) * env.time_scale
        reporter.report("loading", 0.0)
        await asyncio.sleep(secs)
        log.info("default_loader.py:291", f"Loading weights took {secs:.2f} seconds")
        writer.write(encode({"type": "ready"}))
        current["loaded"] = True
        while True:
            f = env.faults()
            writer.write(
                encode(
                    {
                        "type": "hb",
                        "link_mode": env.link(f)[0],
                        "hccs_loss_pct": env.link(f)[1],
                        "garbled": f.garbled,
                    }
                )
            )
            reporter.report("ready", current["load"])
            await asyncio.sleep(HEARTBEAT_S)

    async def listen() -> None:
        while True:
            try:
                line = await reader.readline()
            except OSError:
                line = b""
            if not line:
                log.error(
                    "core.py:1125",
                    "Front-end process died unexpectedly (connection to "
                    f"tcp://{host}:{port} lost); shutting down the engine core.",
                )
                reporter.report("dead", 0.0)
                _resolve(done, 1)
                return
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("type") == "load":
                current["load"] = float(msg.get("load", 0.0))
            elif msg.get("type") == "shutdown":
                log.info(
                    "core.py:1110",
                    "Front-end requested shutdown; shutting down the engine core.",
                )
                _resolve(done, 0)
                return

    tasks = [asyncio.create_task(load_and_beat()), asyncio.create_task(listen())]
    code = await done
    for t in tasks:
        t.cancel()
    writer.close()
    reporter.close()
    return code


def freeze_gc_heap() -> None:
    """What vLLM does once its server is up: every object made so far goes to the
    collector's permanent generation, so a full collection no longer walks the
    startup heap (vllm/utils/gc_utils.py ``freeze_gc_heap``: gc.collect of each
    generation, then gc.freeze(); called in the API server's lifespan,
    vllm/entrypoints/openai/api_server.py, and in ``EngineCore.__init__``,
    vllm/v1/engine/core.py). Without it the sim paused ~24 ms per full collection
    under load, a stall the real engine does not have."""
    for generation in range(3):
        gc.collect(generation)
    gc.freeze()


def serve(args: ServeArgs) -> int:
    """Run the process to its end and return the exit code."""
    env = Env.from_env()
    runner: Callable[[ServeArgs, Env], Coroutine[object, object, int]] = (
        run_headless if args.headless else run_head
    )
    return asyncio.run(runner(args, env))

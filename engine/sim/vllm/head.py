"""The head process (rank 0 / node 0): the API server and its DP engines.

It starts in vLLM's order, logging each phase as vLLM does: the version and config
lines, the handshake socket for the remote ranks, the HTTP socket, the local
engines' HELLO; then the model loads, the startup poll waits for every rank, and only
once all are ready does the API server announce itself and /health turn 200. A
rank that dies makes the head exit 1 (EngineDeadError); SIGTERM/SIGINT stop it
cleanly with 0, shutting the headless ranks down too.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal

from aiohttp import web

from engine.sim.vllm.api import ServerState
from engine.sim.vllm.cli import ServeArgs
from engine.sim.vllm.cluster import (
    HANDSHAKE_AT,
    HEARTBEAT_S,
    HeadRendezvous,
    Peer,
)
from engine.sim.vllm.logs import VllmLog, uvicorn
from engine.sim.vllm.metrics import EngineMetrics
from engine.sim.vllm.model import ModelParams
from engine.sim.vllm.process import Env, Reporter, Run, crash, resolve
from engine.sim.vllm.runtime import LinkState, SimEngine
from engine.sim.vllm.server import build_app

# vLLM's STARTUP_POLL_PERIOD_MS (vllm/v1/engine/utils.py), in simulated seconds
STARTUP_POLL_S = 10.0


async def run_head(args: ServeArgs, env: Env) -> int:
    """The API server process (rank 0 / node 0). Returns the exit code."""
    log = VllmLog("APIServer")
    _start_lines(log, args)
    faults = env.faults()
    reporter = Reporter(env, args, "head")
    if faults.crash:
        return await crash(env, log, faults, reporter)
    head = Head(args, env, log, faults, reporter)
    if not await head.bind_handshake():
        return 1
    if not await head.bind_http():
        return 1
    head.start_engines()
    return await head.run()


def _start_lines(log: VllmLog, args: ServeArgs) -> None:
    """vLLM's first lines: its version, the non-default args, the max model len."""
    log.info("api_server.py:1896", f"vLLM API server version {args.version}")
    log.info(
        "utils.py:328",
        f"non-default args: {{'model_tag': {args.model!r}, 'model': {args.model!r}}}",
    )
    log.info("config.py:1580", f"Using max model len {args.max_model_len}")


def _sim_engine(
    args: ServeArgs, env: Env, log: VllmLog, links: LinkState, engines: int
) -> SimEngine:
    """The head's engine runtime: one engine core per DP rank, its metrics."""
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
    return SimEngine(
        params=params,
        engines=engines,
        metrics=metrics,
        log=log,
        time_scale=env.time_scale,
        links=links,
    )


class Head(Run):
    """One run of the head: its engines, its sockets, and the loops that take it from
    loading to serving."""

    def __post_init__(self) -> None:
        super().__post_init__()
        args, env = self.args, self.env
        self.links = LinkState()
        self.me = env.node or "rank0"
        self.links.set(self.me, *env.link(self.faults))
        self.links.set_garbled(self.me, self.faults.garbled)
        self.engines = max(args.data_parallel_size, 1)
        self.engine = _sim_engine(args, env, self.log, self.links, self.engines)
        self.loaded = False
        self.dead = False
        self.serving = False
        self.rdv: HeadRendezvous | None = None
        self.runner: web.AppRunner | None = None
        self.host = args.host or "0.0.0.0"  # vLLM binds every interface unless --host
        self.own: list[int] = []  # the head's own DP engines
        self.news = asyncio.Event()  # a handshake message came (the rendezvous's)

    # ------------------------------------------------------------- start-up phases

    async def bind_handshake(self) -> bool:
        """Bind the handshake socket the remote ranks join (if any); False (logged)
        if the address is taken."""
        args = self.args
        if not args.remote_ranks:
            return True
        host, port = args.rpc_address
        self.rdv = HeadRendezvous(
            host=host,
            port=port,
            expected=args.remote_ranks,
            log=self.log,
            on_peer_change=self.on_peer,
            on_dead=self.on_dead,
            dp_handshake=not args.nnodes_mode,
        )
        try:
            await self.rdv.start()
        except OSError as exc:
            self.log.error(
                "utils.py:790",
                f"Failed to bind handshake socket tcp://{host}:{port}: {exc} "
                "(Address already in use?)",
            )
            self.reporter.close()
            return False
        return True

    async def bind_http(self) -> bool:
        """Start the HTTP server on --host/--port; False (logged) if it cannot bind."""
        app = build_app(
            ServerState(args=self.args, engine=self.engine, healthy=self.healthy)
        )
        # vLLM's uvicorn closes a connection idle for VLLM_HTTP_TIMEOUT_KEEP_ALIVE s, 5
        # by default (vllm/envs.py; api_server.py passes it as timeout_keep_alive)
        keep_alive = float(os.environ.get("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "5"))
        self.runner = web.AppRunner(
            app, access_log=None, handle_signals=False, keepalive_timeout=keep_alive
        )
        await self.runner.setup()
        try:
            await web.TCPSite(self.runner, self.host, self.args.port).start()
        except OSError as exc:
            self.log.error(
                "api_server.py:1950",
                f"[Errno 98] error while attempting to bind on address "
                f"({self.host!r}, {self.args.port}): "
                f"{exc.strerror or 'address already in use'}",
            )
            await self.runner.cleanup()
            self.reporter.close()
            return False
        return True

    def start_engines(self) -> None:
        """Start the engine loops; the head's own DP engines say HELLO."""
        args = self.args
        self.engine.start()
        # in --nnodes mode the remote ranks are nodes, so every DP engine is the head's
        self.own = [
            r
            for r in range(self.engines)
            if args.nnodes_mode or r not in args.remote_ranks
        ]
        if self.rdv is not None:
            self.news = self.rdv.news
        for r in self.own:
            self.log.debug(HANDSHAKE_AT, f"HELLO from local core engine process {r}.")

    async def run(self) -> int:
        """Load, wait for the ranks and serve until a signal or a dead rank; then shut
        down and return the exit code."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop, sig.name)
        tasks = [
            asyncio.create_task(self.load_model()),
            asyncio.create_task(self.report_loop()),
            asyncio.create_task(self.startup_poll()),
        ]
        code = await self.done
        for t in tasks:
            t.cancel()
        if self.rdv is not None and code == 0:
            await self.rdv.shutdown()
        await self.engine.stop()
        if self.runner is not None:
            await self.runner.cleanup()
        self.reporter.close()
        return code

    # ------------------------------------------------------------- the running head

    def healthy(self) -> bool:
        """/health turns 200 only after the API server's startup lines, as in vLLM."""
        return self.serving and not self.dead

    def on_peer(self, peer: Peer | None) -> None:
        """A remote rank joined or beat: note its link and garbled fault."""
        if peer is not None:
            self.links.set(
                peer.node or f"rank{peer.ranks[0]}", peer.link_mode, peer.loss_pct
            )
            self.links.set_garbled(peer.node or f"rank{peer.ranks[0]}", peer.garbled)

    def on_dead(self, reason: str) -> None:
        """A joined rank dropped: log vLLM's EngineDeadError, exit 1 shortly after."""
        if self.dead:
            return
        self.dead = True
        self.log.error("core_client.py:564", reason)
        self.log.error("async_llm.py:480", "AsyncLLM output_handler failed.")
        self.log.error(
            "async_llm.py:480",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an "
            "issue. "
            "See stack trace (above) for the root cause.",
        )
        asyncio.get_running_loop().call_later(
            self.env.dead_exit_s, resolve, self.done, 1
        )

    def stop(self, signame: str) -> None:
        """SIGTERM/SIGINT: a clean stop, exit code 0."""
        self.log.info(
            "launcher.py:101", f"Shutting down FastAPI HTTP server. ({signame})"
        )
        resolve(self.done, 0)

    def announce_serving(self) -> None:
        """vLLM starts its API server once every engine is ready, then uvicorn's lines."""
        args = self.args
        self.log.info(
            "api_server.py:1971",
            f"Starting vLLM API server 0 on http://{self.host}:{args.port}",
        )
        for _ in range(max(args.api_server_count or 1, 1)):  # one pair per API server
            uvicorn(f"Started server process [{os.getpid()}]")
            uvicorn("Waiting for application startup.")
            uvicorn("Application startup complete.")
        uvicorn(
            f"Uvicorn running on http://{self.host}:{args.port} (Press CTRL+C to quit)"
        )
        freeze_gc_heap()
        self.serving = True

    async def load_model(self) -> None:
        """Load the weights (SIM_LOAD_S plus the slow-start fault); the own engines
        say READY."""
        env = self.env
        secs = (env.load_s + self.faults.slow_start_s) * env.time_scale
        await asyncio.sleep(secs)
        self.log.info(
            "default_loader.py:291", f"Loading weights took {secs:.2f} seconds"
        )
        self.log.info(
            "core.py:222",
            "init engine (profile, create kv cache, warmup model) took 0.00 seconds",
        )
        self.loaded = True
        if not self.args.nnodes_mode:
            for r in self.own:
                self.log.debug(
                    HANDSHAKE_AT, f"READY from local core engine process {r}."
                )
            self.news.set()

    async def startup_poll(self) -> None:
        """vLLM's wait_for_engine_startup: after every poll period without a handshake
        message, DEBUG lines naming the engines not yet connected and those not yet
        ready (local = this node's, remote = the headless ranks')."""
        args, rdv = self.args, self.rdv
        dp = rdv is not None and not args.nnodes_mode
        while True:
            local_ready = self.loaded and (
                not args.nnodes_mode or rdv is None or rdv.all_loaded
            )
            local = 0 if local_ready else len(self.own)
            connect = rdv.unconnected if dp and rdv is not None else 0
            start = rdv.unready if dp and rdv is not None else 0
            if not (local or connect or start) or self.dead:
                return
            try:
                await asyncio.wait_for(
                    self.news.wait(), STARTUP_POLL_S * self.env.time_scale
                )
                self.news.clear()
                continue
            except TimeoutError:
                pass
            if connect:
                self.log.debug(
                    "v1/engine/utils.py:857",
                    f"Waiting for 0 local, {connect} remote core engine proc(s) to "
                    "connect.",
                )
            if local or start:
                self.log.debug(
                    "v1/engine/utils.py:862",
                    f"Waiting for {local} local, {start} remote core engine proc(s) "
                    "to start.",
                )

    async def report_loop(self) -> None:
        """Every heartbeat: re-read the faults, warn of HCCS loss, report the phase
        and load, announce serving once all are ready, send the ranks their load."""
        args, env, links, rdv = self.args, self.env, self.links, self.rdv
        announced = False
        slow: dict[str, float] = {}  # node -> loss already warned about
        while True:
            f = env.faults()
            links.set(self.me, *env.link(f))
            links.set_garbled(self.me, f.garbled)
            _warn_links(self.log, links, slow)
            if self.dead:
                phase = "dead"
            elif not self.loaded:
                phase = "loading"
            elif rdv is not None and not rdv.all_loaded:
                phase = "waiting_for_ranks"
            else:
                phase = "ready"
                if not announced:
                    self.announce_serving()
                    announced = True
            local = [
                r
                for r in range(self.engines)
                if r not in (args.remote_ranks if not args.nnodes_mode else [])
            ]
            load = sum(self.engine.load(r) for r in local) / max(len(local), 1)
            self.reporter.report(phase, load)
            if rdv is not None:
                rdv.send_load(self.engine.load)
            await asyncio.sleep(HEARTBEAT_S)


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

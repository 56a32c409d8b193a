"""A headless rank (``vllm serve … --headless``): joins the head over the handshake
socket, loads, then heartbeats until the head says shutdown (exit 0) or its
connection drops (exit 1). Gives up after SIM_HEADLESS_TIMEOUT_S without a head,
as vLLM does after 5 minutes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import signal

from engine.sim.vllm.cli import ServeArgs
from engine.sim.vllm.cluster import (
    HEARTBEAT_S,
    HandshakeTimeout,
    encode,
    headless_connect,
    read_messages,
)
from engine.sim.vllm.logs import VllmLog
from engine.sim.vllm.process import Env, Reporter, Run, crash, resolve

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def run_headless(args: ServeArgs, env: Env) -> int:
    """A headless rank: join the head, load, heartbeat; exit 0 on head shutdown."""
    ranks = args.my_ranks
    log = VllmLog(f"EngineCore_DP{ranks[0] if ranks else 0}")
    host, port = args.rpc_address
    _launch_line(log, args, host, port)
    faults = env.faults()
    reporter = Reporter(env, args, "headless")
    if faults.crash:
        return await crash(env, log, faults, reporter)
    if not _loopback(host):
        log.error(
            "core.py:708",
            f"The simulator only connects to loopback addresses; {host} is not one.",
        )
        reporter.close()
        return 1
    rank = Headless(args, env, log, faults, reporter)
    joined = await rank.join()
    if isinstance(joined, int):
        reporter.close()
        return joined
    return await rank.run(*joined)


def _launch_line(log: VllmLog, args: ServeArgs, host: str, port: int) -> None:
    """vLLM's first line: a headless multiproc executor (--nnodes) or DP engines."""
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
            f"Launching {len(args.my_ranks)} data parallel engine(s) in headless mode, "
            f"with head node address tcp://{host}:{port}.",
        )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Headless(Run):
    """One run of a headless rank: its ranks, the head's address, and the load the
    head last sent."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.ranks = self.args.my_ranks
        self.host, self.port = self.args.rpc_address
        self.load = 0.0  # the mean load of these ranks, as the head last sent it
        self.loaded = False

    async def join(self) -> Connection | int:
        """Say HELLO to the head (retrying until the timeout) and await its init.

        Returns the connection once joined, else the exit code (1, logged; 0 if a
        signal stopped the rank meanwhile)."""
        env, faults, log = self.env, self.faults, self.log
        host, port = self.host, self.port
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, resolve, self.done, 0)
        self.reporter.report("waiting_for_ranks", 0.0)
        hello = {
            "type": "hello",
            "ranks": self.ranks,
            "node": env.node,
            "link_mode": env.link(faults)[0],
            "hccs_loss_pct": env.link(faults)[1],
            "garbled": faults.garbled,
        }
        connect = asyncio.create_task(
            headless_connect(host, port, hello, env.headless_timeout_s)
        )
        waiters: list[asyncio.Future[object]] = [connect, self.done]  # type: ignore[list-item]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if self.done.done():
            connect.cancel()
            return self.done.result()
        try:
            reader, writer, reply = connect.result()
        except HandshakeTimeout:
            log.error("core.py:708", "EngineCore failed to start.")
            log.error(
                "core.py:708",
                "RuntimeError: Did not receive response from front-end process "
                "within 5 minutes",
            )
            return 1
        if reply.get("type") != "init":
            log.error(
                "core.py:708",
                "EngineCore failed to start: the head refused the handshake: "
                f"{reply.get('reason')}",
            )
            return 1
        log.info(
            "core.py:1067",
            f"Handshake with front-end at tcp://{host}:{port} complete; ranks "
            f"{self.ranks}.",
        )
        return reader, writer

    async def run(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> int:
        """Load and heartbeat while listening to the head; return the exit code."""
        tasks = [
            asyncio.create_task(self.load_and_beat(writer)),
            asyncio.create_task(self.listen(reader)),
        ]
        code = await self.done
        for t in tasks:
            t.cancel()
        writer.close()
        self.reporter.close()
        return code

    async def load_and_beat(self, writer: asyncio.StreamWriter) -> None:
        """Load the weights, say READY, then send a heartbeat every HEARTBEAT_S with
        this node's link and faults."""
        env = self.env
        secs = (env.load_s + self.faults.slow_start_s) * env.time_scale
        self.reporter.report("loading", 0.0)
        await asyncio.sleep(secs)
        self.log.info(
            "default_loader.py:291", f"Loading weights took {secs:.2f} seconds"
        )
        writer.write(encode({"type": "ready"}))
        self.loaded = True
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
            self.reporter.report("ready", self.load)
            await asyncio.sleep(HEARTBEAT_S)

    async def listen(self, reader: asyncio.StreamReader) -> None:
        """Take the head's load and shutdown messages; exit 1 if the head is gone."""
        async for msg in read_messages(reader):
            if msg.get("type") == "load":
                self.load = float(msg.get("load", 0.0))
            elif msg.get("type") == "shutdown":
                self.log.info(
                    "core.py:1110",
                    "Front-end requested shutdown; shutting down the engine core.",
                )
                resolve(self.done, 0)
                return
        self.log.error(
            "core.py:1125",
            "Front-end process died unexpectedly (connection to "
            f"tcp://{self.host}:{self.port} lost); shutting down the engine core.",
        )
        self.reporter.report("dead", 0.0)
        resolve(self.done, 1)

"""One simulated `vllm serve` process: the head (API server + engines, head.py) or
a headless rank (headless.py); their shared settings are in process.py.

Environment: ``SIM_TIME_SCALE`` (1.0; multiplies every simulated duration),
``SIM_LOAD_S`` (3 s model load), ``SIM_HEADLESS_TIMEOUT_S`` (300 s × scale, vLLM's
5-minute handshake timeout), ``SIM_DEAD_EXIT_S`` (1 s from a dead rank to the head's
exit), ``SIM_STATE_DIR`` + ``SIM_NODE``/``NODE_NAME`` (node state, faults, reporting),
``HCCL_INTRA_ROCE_ENABLE`` ("1" ⇒ intra-server traffic on RoCE).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine

from engine.sim.vllm.cli import ServeArgs
from engine.sim.vllm.head import run_head
from engine.sim.vllm.headless import run_headless
from engine.sim.vllm.process import Env


def serve(args: ServeArgs) -> int:
    """Run the process to its end and return the exit code."""
    env = Env.from_env()
    runner: Callable[[ServeArgs, Env], Coroutine[object, object, int]] = (
        run_headless if args.headless else run_head
    )
    return asyncio.run(runner(args, env))

"""A vLLM-compatible simulator.

``python -m engine.sim.vllm serve MODEL [vllm serve flags…]``
``python -m engine.sim.vllm bench serve [vllm bench serve flags…]`` (engine/sim/vllm/bench.py)
"""

from __future__ import annotations

import sys

from engine.sim.vllm.cli import parse_serve_args, sim_version
from engine.sim.vllm.node import serve

USAGE = (
    "usage: python -m engine.sim.vllm serve MODEL [vllm serve flags...]"
    "   (--help for the flags)"
)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for command-line errors, like argparse)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        print(
            f"Simulates vLLM {sim_version()} (env SIM_VLLM_VERSION). `serve --help` "
            "lists every flag."
        )
        return 0
    if argv[:2] == ["bench", "serve"]:
        from engine.sim.vllm import bench  # aiohttp client: only for this command

        return bench.main(argv[2:])
    if argv[0] != "serve":
        sys.stderr.write(
            f"{USAGE}\nvllm: error: unknown command {argv[0]!r}; only 'serve' and "
            "'bench serve' are simulated\n"
        )
        return 2
    if argv[1:2] == ["--version"]:
        print(sim_version())
        return 0
    args = parse_serve_args(argv[1:])
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())

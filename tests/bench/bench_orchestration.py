"""Orchestration overhead of a rank-ordered start: 4 and 32 simulated nodes side by side.

    .venv/bin/python tests/bench/bench_orchestration.py [--sizes 4,32] [--load-s 2]

For each size it starts one real agent worker per node and a control worker, runs
a `start` operation (preflight included, warm-up off) on a DP=N × TP8 sim cluster,
and compares the operation's wall time with the engines' own start times, read
from each engine's log ("Loading weights took X seconds"):

- overhead = total − the slowest engine's load (the engines load in parallel once
  they are started, so that is the floor a perfect orchestrator could reach);
- the issue's literal figure, total − Σ loads, is printed beside it.
Both are also shown per node, so the ratio says how the cost grows with nodes.
"""

from __future__ import annotations

import argparse
import os
import re
import time

import _env  # noqa: F401  (environment, Redis, database)

from console.models import Operation, OperationState
from console.services.agents import agent_call
from console.services.operations import operation_start
from tests.agents import agents, control_worker
from tests.factories import make_cluster, make_profile

LOADED = re.compile(r"Loading weights took ([0-9.]+) seconds")


def run(n_nodes: int, load_s: float) -> dict[str, float]:
    profile = make_profile(name=f"bench dp{n_nodes}", data_parallel_size=n_nodes)
    cluster = make_cluster(
        f"bench{n_nodes}", nodes=n_nodes, profile=profile, free_ports=True
    )
    nodes = cluster.ranked_nodes()
    env = {
        "SIM_TIME_SCALE": "1",
        "SIM_LOAD_S": str(load_s),
        "SIM_STATE_DIR": os.path.join(_env.VAR, "sim", str(n_nodes)),
    }
    control_env = {
        "WARMUP_REQUESTS": "0",
        "ENGINE_HEALTH_TIMEOUT_S": "600",
        "PREFLIGHT_TIMEOUT_S": "300",
        "AGENT_TIMEOUT_S": "120",
    }
    t0 = time.perf_counter()
    with agents(
        [n.name for n in nodes],
        extra_env=env,
        npu_ips={n.name: n.npu_ips for n in nodes},
    ):
        agents_up = time.perf_counter() - t0
        with control_worker(control_env):
            op = operation_start(cluster=cluster, kind="start", reason="bench")
            while op.finished_at is None:
                time.sleep(0.2)
                op.refresh_from_db()
            if op.state != OperationState.SUCCEEDED:
                raise SystemExit(f"start of {n_nodes} nodes failed: {op.error}")
            loads = []
            for node in nodes:
                lines = agent_call(node, "engine.logs", lines=400)["lines"]
                loads += [
                    float(m.group(1)) for line in lines if (m := LOADED.search(line))
                ]
            checks = [
                s
                for s in op.steps.all()
                if s.name == "Agents reachable"
                or s.name.startswith("Preflight checks on")
                or s.name
                in (
                    "Same versions and model on every node",
                    "Launch plan valid and fits in HBM",
                )
            ]
            preflight = (
                max(s.finished_at for s in checks) - min(s.started_at for s in checks)
            ).total_seconds()
            stop = operation_start(cluster=cluster, kind="stop", reason="bench")
            while Operation.objects.get(pk=stop.pk).finished_at is None:
                time.sleep(0.2)
    total = (op.finished_at - op.started_at).total_seconds()
    return {
        "nodes": n_nodes,
        "agents_up_s": agents_up,
        "total_s": total,
        "preflight_s": preflight,
        "max_load_s": max(loads),
        "sum_load_s": sum(loads),
        "overhead_s": total - max(loads),
        "literal_s": total - sum(loads),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="4,32", help="comma-separated node counts (default 4,32)"
    )
    parser.add_argument(
        "--load-s",
        type=float,
        default=2.0,
        help="simulated model load time per engine (s)",
    )
    args = parser.parse_args()
    print(
        f"database: {os.environ['DATABASE_URL'].split(':')[0]}, simulated load {args.load_s:.1f} s per engine, warm-up off"
    )
    print(
        f"{'nodes':>5} {'start op (s)':>12} {'preflight':>9} {'max load':>9} {'Σ load':>8} {'overhead':>9} {'/node':>7} {'total−Σ':>8}"
    )
    base = None
    for size in (int(s) for s in args.sizes.split(",")):
        r = run(size, args.load_s)
        per_node = r["overhead_s"] / size
        base = base or per_node
        print(
            f"{size:>5} {r['total_s']:>12.2f} {r['preflight_s']:>9.2f} {r['max_load_s']:>9.2f} {r['sum_load_s']:>8.2f} {r['overhead_s']:>9.2f}"
            f" {per_node:>7.3f} {r['literal_s']:>8.2f}   overhead per node x{per_node / base:.2f} vs smallest"
            f"  (agents came up in {r['agents_up_s']:.1f} s, not counted)"
        )


if __name__ == "__main__":
    main()

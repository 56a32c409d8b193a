"""Ingest throughput: synthetic agent results for 10 / 100 / 1,000 nodes x 8 NPUs (parse + store + publish).

    .venv/bin/python tests/bench/bench_ingest.py [--rounds 5]

Prints samples/s and the cost per node for each size side by side, so the ratio
shows how cost grows with node count. One round = what one beat tick ingests.
"""

from __future__ import annotations

import argparse
import copy
import os
import time

import _env  # noqa: F401  (environment, Redis, database)
from django.utils import timezone

from console.models import Cluster, EngineProfile, Node, NodeRole
from monitoring.ingest import NodeResult, ingest_round
from monitoring.models import ChipSample
from tests.monitoring.samples import agent_sample

NODES_PER_CLUSTER = 4


def make_fleet(n_nodes: int, tag: str) -> list[Node]:
    profile, _ = EngineProfile.objects.get_or_create(
        name="bench",
        defaults={
            "model_path": "/data/m",
            "served_model_name": "m",
            "vllm_version": "0.23.0",
        },
    )
    nodes: list[Node] = []
    for c in range(max(1, n_nodes // NODES_PER_CLUSTER)):
        cluster = Cluster.objects.create(name=f"{tag}-c{c}", profile=profile)
        for r in range(min(NODES_PER_CLUSTER, n_nodes - len(nodes))):
            nodes.append(
                Node(
                    name=f"{tag}-c{c}-n{r}",
                    hostname="h",
                    management_ip="127.0.3.1",
                    cluster=cluster,
                    rank=r,
                    role=NodeRole.HEAD if r == 0 else NodeRole.WORKER,
                    agent_queue=f"node.{tag}-c{c}-n{r}",
                )
            )
    Node.objects.bulk_create(nodes)
    return list(Node.objects.filter(name__startswith=f"{tag}-").order_by("pk"))


def run(n_nodes: int, rounds: int) -> dict[str, float]:
    nodes = make_fleet(n_nodes, f"b{n_nodes}")
    template = agent_sample("template")
    timings: list[float] = []
    for i in range(rounds):
        results = []
        for node in nodes:
            sample = copy.deepcopy(template)
            sample["node"] = node.name
            for h in sample["hccs"]:
                h["links"][0]["tx_packets"] += 1000 * i
                h["links"][0]["retry_count"] += 3 * i
            results.append(NodeResult(node.pk, sample=sample))
        started = time.perf_counter()
        ingest_round(nodes=results, scrapes=[], started_at=timezone.now())
        timings.append(time.perf_counter() - started)
    steady = timings[1:] or timings  # round 1 has no previous HCCS counters
    per_round = sum(steady) / len(steady)
    chips = ChipSample.objects.filter(node__in=nodes[:1]).count() // rounds
    return {
        "nodes": n_nodes,
        "round_s": per_round,
        "per_node_ms": per_round / n_nodes * 1000,
        "samples_s": n_nodes * chips / per_round,
        "nodes_s": n_nodes / per_round,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="10,100,1000")
    args = parser.parse_args()
    print(
        f"database: {os.environ['DATABASE_URL'].split(':')[0]}, rounds per size: {args.rounds} (first round excluded)"
    )
    print(
        f"{'nodes':>6} {'round (s)':>10} {'per node (ms)':>14} {'chip samples/s':>15} {'nodes/s':>9}"
    )
    base = None
    for size in (int(s) for s in args.sizes.split(",")):
        r = run(size, args.rounds)
        base = base or r["per_node_ms"]
        print(
            f"{r['nodes']:>6} {r['round_s']:>10.3f} {r['per_node_ms']:>14.3f} {r['samples_s']:>15.0f} {r['nodes_s']:>9.0f}"
            f"   per-node cost x{r['per_node_ms'] / base:.2f} vs smallest"
        )


if __name__ == "__main__":
    main()

"""A collection round through a real agent worker (Celery on Redis) and a real sim engine's /metrics."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import override_settings

from console.models import AuditEvent, Node, NodeState
from console.services.agents import agent_call
from monitoring.models import ChipSample, EngineSample, NodeLatest, SampleError
from monitoring.tasks import collect_all, collect_round_task
from tests.agents import agent_worker
from tests.factories import free_port, make_cluster
from tests.integration.test_agent import FAST_SIM, single_node_plan, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def solo_cluster(name: str) -> tuple[Any, Node]:
    cluster = make_cluster(name=name, nodes=1)
    node = cluster.ranked_nodes()[0]
    node.management_ip, node.api_port, node.rpc_port = (
        "127.0.0.1",
        free_port(),
        free_port(),
    )
    node.save()
    return cluster, node


def test_it_collects_ingests_and_scrapes_a_sim_node(tmp_path: Path) -> None:
    cluster, node = solo_cluster("mon-solo")
    env = {
        **FAST_SIM,
        "SIM_STATE_DIR": str(tmp_path),
        "SIM_NPU_IPS": ",".join(f"127.10.98.{i + 1}" for i in range(8)),
    }
    with agent_worker(node.name, extra_env=env):
        assert Node.objects.get(pk=node.pk).detected_server_model == ""
        first = collect_round_task()
        assert first["ok"] == 1 and first["nodes"] == 1
        # a node never preflighted learns its server model from its first collect
        # (the sim's default: the demo's Atlas 800T A2), audited as a system change
        learned = Node.objects.get(pk=node.pk)
        assert learned.detected_server_model == "atlas-800t-a2"
        assert learned.detected_server_model_evidence  # what it read, for the page
        assert AuditEvent.objects.filter(
            action="node.server_model_detected", target_id=str(node.pk)
        ).exists()
        assert ChipSample.objects.filter(node=node).count() == 8
        assert len(NodeLatest.objects.get(node=node).data["hccs"]) == 8
        assert Node.objects.get(pk=node.pk).state == NodeState.READY
        plan = single_node_plan(node.name, node.api_port, node.rpc_port)
        agent_call(node.name, "engine.start", plan=plan)
        wait_for(
            lambda: agent_call(node.name, "engine.status")["health"] == 200, timeout=60
        )
        collect_round_task()  # the head now reports a running engine → scraped from the next round on
        assert Node.objects.get(pk=node.pk).state == NodeState.RUNNING
        collect_round_task()
        for _ in range(3):
            httpx.post(
                f"http://127.0.0.1:{node.api_port}/v1/completions",
                json={"model": "small", "prompt": "hi", "max_tokens": 8},
                timeout=30,
            )
        collect_round_task()
        rows = EngineSample.objects.filter(cluster=cluster, engine="all").order_by("ts")
        assert rows.count() == 2
        assert rows.last().ttft_p99 is not None and rows.last().gen_tps > 0  # type: ignore[union-attr]
        assert not SampleError.objects.filter(cluster=cluster).exists()
        agent_call(node.name, "engine.stop", grace_s=10)


def test_it_keeps_sampling_an_agent_slower_than_a_1s_interval(tmp_path: Path) -> None:
    _, node = solo_cluster("mon-slow")
    env = {**FAST_SIM, "SIM_STATE_DIR": str(tmp_path)}
    # A sim collect runs ~40 tool processes (seconds); rounds wait only 0.3 s, as with COLLECT_INTERVAL_S=1.
    with (
        override_settings(COLLECT_DEADLINE_S=0.3),
        agent_worker(node.name, extra_env=env),
    ):
        answered = 0
        for _ in range(40):
            answered += collect_round_task().get("ok", 0)
            if answered >= 2:
                break
            time.sleep(0.7)
        assert answered >= 2  # answers that took several rounds were still ingested
        assert ChipSample.objects.filter(node=node).count() == 8 * answered
        assert Node.objects.get(pk=node.pk).state == NodeState.READY


def test_it_counts_a_missing_agent_as_a_missed_sample() -> None:
    _, node = solo_cluster("mon-ghost")
    results, scrapes = collect_all(deadline_s=1.0)
    mine = next(r for r in results if r.node_id == node.pk)
    assert mine.sample is None and mine.error is None and scrapes == []

"""Issue 17: a benchmark run is an operation — vllm bench serve on the head (the sim's,
same flags and --save-result names), one point per concurrency, each stored under vLLM's
names and judged against the profile's targets; the cluster keeps serving.

Real control worker and node agent (sim driver), a one-node cluster started for real.
"""

from __future__ import annotations

import time
from io import StringIO
from pathlib import Path

import psutil
import pytest
from django.core.management import call_command

from console.models import BenchmarkRun, ClusterState, OperationState
from console.services.inventory import DEMO_PROFILES
from console.services.operations import (
    OperationRefused,
    operation_cancel,
    operation_start,
)
from tests.agents import agents, control_worker, sim_engines
from tests.factories import make_cluster, make_profile, make_user
from tests.integration.test_operations import CONTROL_ENV, FAST, wait_op, watch_op

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _bench_processes(state_dir: Path) -> list[psutil.Process]:
    """The sim's vllm bench serve processes of this test's agents: their sim processes
    (by SIM_STATE_DIR; another process of `make test` may run a benchmark meanwhile)
    that are the bench tool, not the engine."""
    found = []
    for proc in sim_engines(state_dir):
        try:
            if "bench" in proc.cmdline():
                found.append(proc)
        except psutil.Error:  # ended since
            continue
    return found


def test_a_benchmark_sweep_runs_on_the_head_and_is_judged_against_the_targets(
    tmp_path: Path,
) -> None:
    profile = make_profile(
        **{
            **DEMO_PROFILES["w8a8"],
            "name": "bench w8a8",
            "data_parallel_size": 1,
            # the acceptance target at a small shape, out of reach on purpose
            "target_concurrency": 2,
            "target_input_len": 32,
            "target_output_len": 16,
            "target_output_tps_per_npu": 1e6,
        }
    )
    cluster = make_cluster("bench", nodes=1, profile=profile, free_ports=True)
    (node,) = cluster.ranked_nodes()
    user = make_user("bea", "operator")
    with pytest.raises(OperationRefused) as refused:  # not serving yet
        operation_start(
            cluster=cluster,
            kind="benchmark",
            user=user,
            params={"bench": {"concurrency": "1"}},
        )
    assert refused.value.field == "kind"
    # tokens at a fifth of real speed: a point lasts seconds, long enough to be watched
    env = {**FAST, "SIM_TIME_SCALE": "0.2", "SIM_STATE_DIR": str(tmp_path)}
    with (
        agents([node.name], extra_env=env, npu_ips={node.name: node.npu_ips}),
        control_worker({**CONTROL_ENV, "ENGINE_LISTEN_TIMEOUT_S": "5"}),
    ):
        start = wait_op(
            operation_start(cluster=cluster, kind="start", user=user), timeout=180
        )
        assert start.state == OperationState.SUCCEEDED, start.error

        # bad input names the field; nothing is queued
        for bench, field in (
            ({"concurrency": "1,x"}, "concurrency"),
            ({"concurrency": "1,2", "request_rate": "1,2"}, "request_rate"),
            ({"concurrency": "1", "goodput": "latency:5"}, "goodput"),
            ({"concurrency": "1", "burstiness": 0.5}, "burstiness"),
        ):
            with pytest.raises(OperationRefused) as bad:
                operation_start(
                    cluster=cluster,
                    kind="benchmark",
                    user=user,
                    params={"bench": bench},
                )
            assert bad.value.field == field, (bench, str(bad.value))

        # a sweep over concurrency 1 and 4, at a shape with no target
        op, seen = watch_op(
            operation_start(
                cluster=cluster,
                kind="benchmark",
                user=user,
                params={
                    "bench": {
                        "concurrency": "1,4",
                        "input_len": 24,
                        "output_len": 16,
                        "num_prompts": 24,
                        "goodput": "ttft:60000",
                    }
                },
            )
        )
        assert op.state == OperationState.SUCCEEDED, op.error
        runs = list(BenchmarkRun.objects.filter(sweep=f"op{op.pk}").order_by("pk"))
        assert [r.max_concurrency for r in runs] == [1, 4]
        for r in runs:
            assert r.tool == "vllm bench serve (sim)" and r.source == "run"
            assert (r.completed, r.failed) == (24, 0)
            # --ignore-eos: every request generated exactly output_len tokens
            assert r.total_output_tokens == 24 * 16
            assert r.total_input_tokens == 24 * 24
            assert r.request_goodput == pytest.approx(r.request_throughput)
            assert r.latency_ms["p99_ttft_ms"] >= r.latency_ms["median_ttft_ms"] > 0
            assert (r.input_len, r.output_len, r.plan_digest != "") == (24, 16, True)
        # concurrency shows: 4 at once finish the same prompts sooner than 1 at a time
        assert runs[1].duration < runs[0].duration
        # live progress, from the tool's own bar, while the first point ran
        assert any("/24 prompts," in text for text in seen), (runs[0].duration, seen)
        # and the engine's own TTFT quantiles so far, from its /metrics
        assert any("engine TTFT so far p50" in text for text in seen), seen
        rows = list(op.steps.order_by("seq"))
        assert rows[-1].state == "warning" and "no target" in rows[-1].summary
        cluster.refresh_from_db()
        assert cluster.state == ClusterState.RUNNING  # it only read

        # a cancel ends the tool on the head: no vllm bench serve is left running
        long = operation_start(
            cluster=cluster,
            kind="benchmark",
            user=user,
            params={
                "bench": {
                    "concurrency": "1",
                    "input_len": 24,
                    "output_len": 16,
                    "num_prompts": 500,
                }
            },
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _bench_processes(tmp_path):
            time.sleep(0.1)
        assert _bench_processes(tmp_path), "the tool never started on the head"
        long.refresh_from_db()  # running now: the cancel asks its runbook to stop
        operation_cancel(operation=long, user=user)
        long = wait_op(long, timeout=60)
        assert long.state == OperationState.CANCELLED, (long.state, long.error)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _bench_processes(tmp_path):
            time.sleep(0.2)
        assert not _bench_processes(tmp_path)
        assert not BenchmarkRun.objects.filter(sweep=f"op{long.pk}").exists()
        cluster.refresh_from_db()
        assert cluster.state == ClusterState.RUNNING

        # at the target's shape the out-of-reach target fails the run, naming it
        out = StringIO()
        with pytest.raises(Exception) as failed:
            call_command(
                "bench",
                "run",
                cluster.name,
                "--concurrency",
                "2",
                "--num-prompts",
                "10",
                stdout=out,
            )
        text = out.getvalue()
        assert "Serving Benchmark Result" in text and "NOT ACCEPTED" in text, text
        assert "output_tps_per_npu" in text or "tokens/s per NPU" in text, text
        assert "failed" in str(failed.value)
        cluster.refresh_from_db()
        assert cluster.state == ClusterState.RUNNING


def test_through_the_gateway_the_run_has_its_own_key_and_the_usage_shows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console.models import ApiKey, ApiUsage
    from tests.e2e.test_dashboard import uvicorn_server

    profile = make_profile(
        **{**DEMO_PROFILES["w8a8"], "name": "gw w8a8", "data_parallel_size": 1}
    )
    cluster = make_cluster("benchgw", nodes=1, profile=profile, free_ports=True)
    (node,) = cluster.ranked_nodes()
    user = make_user("gwen", "operator")
    monkeypatch.setenv("GATEWAY_USAGE_FLUSH_S", "0")  # the gateway writes usage at once
    env = {**FAST, "SIM_STATE_DIR": str(tmp_path)}
    with (
        uvicorn_server() as base,
        agents([node.name], extra_env=env, npu_ips={node.name: node.npu_ips}),
        control_worker(
            {**CONTROL_ENV, "ENGINE_LISTEN_TIMEOUT_S": "5", "BENCH_GATEWAY_URL": base}
        ),
    ):
        start = wait_op(
            operation_start(cluster=cluster, kind="start", user=user), timeout=180
        )
        assert start.state == OperationState.SUCCEEDED, start.error
        op, _ = watch_op(
            operation_start(
                cluster=cluster,
                kind="benchmark",
                user=user,
                params={
                    "bench": {
                        "concurrency": "2",
                        "input_len": 16,
                        "output_len": 8,
                        "num_prompts": 10,
                        "target": "gateway",
                    }
                },
            )
        )
        assert op.state == OperationState.SUCCEEDED, op.error
        assert "through the gateway" in op.steps.order_by("seq").first().name
        (run,) = BenchmarkRun.objects.filter(sweep=f"op{op.pk}")
        assert run.target == "gateway" and (run.completed, run.failed) == (10, 0)
        key = ApiKey.objects.get(name=f"bench-op{op.pk}")
        assert key.revoked_at is not None  # the run's key died with the run
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not ApiUsage.objects.filter(key=key):
            time.sleep(0.2)
        usage = ApiUsage.objects.get(key=key)
        # the tool's initial test request and the 10 of the point, all through /v1
        assert usage.requests == 11 and usage.completion_tokens == 11 * 8

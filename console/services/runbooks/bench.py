"""Benchmark: vLLM's ``vllm bench serve`` on the head, one sweep point after another,
each result stored under vLLM's names and judged against the profile's targets.

The load runs where vLLM's own tool would run it (the head node, engine/bench_serve.py),
straight to the head's API (the figures are the engine's alone) or, when the operator
chooses, through the console's gateway (``BENCH_GATEWAY_URL``, with a key made for the
run and revoked after it: the figures then include the gateway, as clients see it). A point
shows the prompts done as the tool's progress bar reports them; a cancel ends the
running tool on the node. The operation only reads: the cluster stays as it was, and
automatic remediation leaves alone the latency and queue alerts its load causes
(monitoring/remediation/guardrails.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from celery.result import AsyncResult
from django.conf import settings

from console.celery import app, node_queue
from console.gateway.services import apikey_create, apikey_revoke
from console.models import BenchmarkRun
from console.models.operations import OperationStep, StepState
from console.opsmessages import message
from console.services import benchmarks
from console.services.bench_runs import point_name
from console.services.runbooks.base import Cancelled, Run
from engine import bench
from engine.checktext import join
from engine.parsers import ParseError, vllm_metrics

KEY_LIMIT = 2**31 - 1  # the run's own key: the load is the point, not a tenant's share


def bench_rows(run: Run) -> dict[str, Any]:
    points = run.op.params["bench"]["points"]
    head = run.head()
    via = run.op.params["bench"].get("target") == "gateway"
    return {
        "points": [
            run.add_step(
                f"Benchmark at {point_name(p)} through the gateway, from {head.name}"
                if via
                else f"Benchmark at {point_name(p)} on {head.name}",
                head,
            )
            for p in points
        ],
        "targets": run.add_step("Check the results against the profile's targets"),
    }


def _tool(answer: dict[str, Any]) -> tuple[str, str]:
    sim = answer.get("driver") == "sim"
    return ("vllm bench serve (sim)" if sim else "vllm bench serve"), str(
        answer.get("tool_version") or ""
    )


def _figures(stored: BenchmarkRun) -> dict[str, Any]:
    """A point's step summary: "#pk: N ok, M failed; … output tok/s …" (a message)."""
    lat = stored.latency_ms
    figures = {
        "pk": stored.pk,
        "ok": int(stored.completed),
        "failed": int(stored.failed),
        "tps": f"{stored.output_throughput:.1f}",
        "p50": f"{lat.get('median_ttft_ms', 0):.0f}",
        "p99": f"{lat.get('p99_ttft_ms', 0):.0f}",
        "tpot": f"{lat.get('p99_tpot_ms', 0):.1f}",
    }
    if stored.output_tps_per_npu is None:
        return message("summary.bench_figures", **figures)
    return message(
        "summary.bench_figures_npu",
        per_npu=f"{stored.output_tps_per_npu:.2f}",
        **figures,
    )


class EngineSoFar:
    """The head's own TTFT quantiles since the point began, from its ``/metrics``
    histograms (the delta between two scrapes: engine.parsers.vllm_metrics.derive), read
    at most every ``every`` seconds. ``/metrics`` needs no key (vLLM guards only /v1,
    console/engine_auth.py). Unreadable metrics show nothing rather than stop the run."""

    def __init__(self, url: str, every: float = 2.0) -> None:
        self.url, self.every = url, every
        self.start = self._scrape()
        self.t0 = self.last = time.monotonic()
        self.ttft: tuple[str, str] | None = None  # p50, p99 in ms

    def _scrape(self) -> dict[str, Any] | None:
        try:
            body = httpx.get(f"{self.url}/metrics", timeout=2).text
            return vllm_metrics.parse_exposition(body)
        except (httpx.HTTPError, ParseError):
            return None

    def so_far(self) -> tuple[str, str] | None:
        now = time.monotonic()
        if self.start is None or now - self.last < self.every:
            return self.ttft
        self.last = now
        cur = self._scrape()
        if cur is None:
            return self.ttft
        win = vllm_metrics.derive(self.start, cur, max(now - self.t0, 1e-3))
        whole = win.get(vllm_metrics.CLUSTER)
        if (
            whole is not None
            and whole.ttft_p50 is not None
            and whole.ttft_p99 is not None
        ):
            self.ttft = (
                f"{whole.ttft_p50 * 1000:.0f}",
                f"{whole.ttft_p99 * 1000:.0f}",
            )
        return self.ttft


def _wait(
    run: Run,
    row: OperationStep,
    result: AsyncResult,
    timeout: float,
    engine: EngineSoFar,
) -> Any:
    deadline = time.monotonic() + timeout
    shown: Any = None
    started = time.monotonic()
    while not result.ready():
        run.check_cancel()
        info = result.info if result.state == "PROGRESS" else None
        if isinstance(info, dict) and info != shown:
            shown = info
            spent = time.monotonic() - started
            so_far = engine.so_far()
            counts = {
                "done": info.get("done"),
                "total": info.get("total"),
                "seconds": f"{spent:.0f}",
            }
            run.step_update(
                row,
                progress_done=int(info.get("done") or 0),
                progress_total=max(1, int(info.get("total") or 1)),
                summary=message("summary.bench_progress", **counts)
                if so_far is None
                else message(
                    "summary.bench_progress_ttft",
                    p50=so_far[0],
                    p99=so_far[1],
                    **counts,
                ),
            )
        if time.monotonic() > deadline:
            raise run.fail(
                row,
                message(
                    "summary.no_answer_within",
                    seconds=f"{timeout:.0f}",
                    setting="BENCH_POINT_TIMEOUT_S",
                ),
            )
        time.sleep(0.25)
    try:
        return result.get(timeout=1, propagate=True, disable_sync_subtasks=False)
    except Exception as exc:  # the agent's own error is the step's evidence
        raise run.fail(
            row, message("summary.head_agent_error", error=str(exc))
        ) from None


def _point(
    run: Run, row: OperationStep, shape: dict[str, Any], gateway: dict[str, str] | None
) -> BenchmarkRun:
    head = run.head()
    timeout = float(settings.BENCH_POINT_TIMEOUT_S)
    run.begin(row)
    engine = EngineSoFar(run.head_url())
    kwargs: dict[str, Any] = {"node": head.name, "shape": shape}
    if gateway:
        kwargs["gateway"] = gateway
    result = app.send_task(
        "node.bench_serve",
        kwargs=kwargs,
        queue=head.agent_queue or node_queue(head.name),
        expires=timeout,
    )
    try:
        answer = _wait(run, row, result, timeout, engine)
    except Cancelled:
        app.send_task(  # end the tool on the node; the answer is not awaited
            "node.bench_stop",
            kwargs={"node": head.name},
            queue=head.agent_queue or node_queue(head.name),
            expires=60,
        )
        raise
    finally:
        result.forget()
    try:
        parsed = bench.parse_result(answer.get("result"))
    except bench.ResultInvalid as exc:
        raise run.fail(
            row, message("summary.result_unusable", error=str(exc))
        ) from None
    tool, version = _tool(answer)
    stored = benchmarks.benchmark_store(
        parsed,
        cluster=run.cluster,
        tool=tool,
        tool_version=version,
        source="run",
        target="gateway" if gateway else "head",
        sweep=f"op{run.op.pk}",
        input_len=shape["input_len"],
        output_len=shape["output_len"],
        label=run.op.params["bench"].get("label") or f"op{run.op.pk}",
        actor=run.op.requested_by,
        raw=answer.get("result"),
    )
    run.finish(
        row,
        _figures(stored),
        progress_done=int(stored.completed + stored.failed),
        progress_total=max(1, int(stored.completed + stored.failed)),
        data={"benchmark": stored.pk, "table": answer.get("table", "")},
    )
    return stored


@contextmanager
def _gateway_key(run: Run) -> Iterator[dict[str, str] | None]:
    """Through the gateway: a key of the run's own (its usage shows on the API keys
    page), revoked when the run ends however it ends; both audited."""
    if run.op.params["bench"].get("target") != "gateway":
        yield None
        return
    key, secret = apikey_create(
        name=f"bench-op{run.op.pk}",
        user=run.op.requested_by,
        rpm=KEY_LIMIT,
        tpm=KEY_LIMIT,
    )
    try:
        yield {"url": settings.BENCH_GATEWAY_URL, "key": secret}
    finally:
        apikey_revoke(key=key, user=run.op.requested_by)


def run_bench(run: Run, rows: dict[str, Any]) -> None:
    points = run.op.params["bench"]["points"]
    with _gateway_key(run) as gateway:
        stored = [
            _point(run, row, shape, gateway)
            for row, shape in zip(rows["points"], points, strict=True)
        ]
    run.result["benchmarks"] = [s.pk for s in stored]
    judge(run, rows["targets"], stored)


def judge(run: Run, row: OperationStep, stored: list[BenchmarkRun]) -> None:
    """The targets step: each point against the profile's targets (and the baseline)."""
    run.begin(row)
    verdicts = {s.pk: benchmarks.verdict_of(s) for s in stored}
    # one line per point, whole in the stored message (the English text is cut at 500)
    lines = join([_verdict_line(s, verdicts[s.pk]) for s in stored], " | ")
    run.result["verdicts"] = {str(k): v["passed"] for k, v in verdicts.items()}
    judged = [v["passed"] for v in verdicts.values() if v["passed"] is not None]
    if judged and not all(judged):
        raise run.fail(row, message("summary.bench_rejected", lines=lines))
    run.finish(
        row,
        lines if judged else message("summary.bench_no_target", lines=lines),
        state=StepState.SUCCEEDED if judged else StepState.WARNING,
    )


VERDICT = {
    True: "summary.accepted",
    False: "summary.not_accepted",
    None: "summary.no_target",
}


def _verdict_line(s: BenchmarkRun, v: dict[str, Any]) -> dict[str, Any]:
    """ "#pk concurrency N: ACCEPTED — name pass (+3.0%); …" as a message."""
    verdict = message(VERDICT[v["passed"]])
    if v["regressed"]:
        verdict = message("summary.regressed", verdict=verdict)
    checks = []
    for c in v["checks"]:
        outcome = "pass" if c["passed"] else "fail"
        if c["margin_pct"] is None:
            checks.append(message(f"summary.target_{outcome}", name=c["name"]))
        else:
            checks.append(
                message(
                    f"summary.target_{outcome}_margin",
                    name=c["name"],
                    margin=f"{c['margin_pct']:+.1f}",
                )
            )
    head = {"pk": s.pk, "concurrency": s.max_concurrency or "-", "verdict": verdict}
    if not checks:
        return message("summary.bench_line", **head)
    return message("summary.bench_line_checks", checks=join(checks, "; "), **head)

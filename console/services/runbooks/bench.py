"""Benchmark: vLLM's ``vllm bench serve`` on the head, one sweep point after another,
each result stored under vLLM's names and judged against the profile's targets.

The load runs where vLLM's own tool would run it (the head node, engine/bench_serve.py),
straight to the head's API (the figures are the engine's alone) or, when the operator
chooses, through the console's gateway (``BENCH_GATEWAY_URL``, with a key made for the
run and revoked after it: the figures then include the gateway, as clients see it). A point
shows the prompts done as the tool's progress bar reports them; a cancel ends the
running tool on the node. The operation only reads: the cluster stays as it was, and
automatic remediation leaves alone the latency and queue alerts its load causes
(monitoring/remediation/decide.py).
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
from console.services import benchmarks
from console.services.bench_runs import point_name
from console.services.runbooks.base import Cancelled, Run
from engine import bench
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


def _figures(stored: BenchmarkRun) -> str:
    lat = stored.latency_ms
    per_npu = (
        f", {stored.output_tps_per_npu:.2f} tok/s per NPU"
        if stored.output_tps_per_npu is not None
        else ""
    )
    return (
        f"{int(stored.completed)} ok, {int(stored.failed)} failed; "
        f"{stored.output_throughput:.1f} output tok/s{per_npu}; "
        f"TTFT p50 {lat.get('median_ttft_ms', 0):.0f} ms, p99 {lat.get('p99_ttft_ms', 0):.0f} ms; "
        f"TPOT p99 {lat.get('p99_tpot_ms', 0):.1f} ms"
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
        self.text = ""

    def _scrape(self) -> dict[str, Any] | None:
        try:
            body = httpx.get(f"{self.url}/metrics", timeout=2).text
            return vllm_metrics.parse_exposition(body)
        except (httpx.HTTPError, ParseError):
            return None

    def line(self) -> str:
        now = time.monotonic()
        if self.start is None or now - self.last < self.every:
            return self.text
        self.last = now
        cur = self._scrape()
        if cur is None:
            return self.text
        win = vllm_metrics.derive(self.start, cur, max(now - self.t0, 1e-3))
        whole = win.get(vllm_metrics.CLUSTER)
        if (
            whole is not None
            and whole.ttft_p50 is not None
            and whole.ttft_p99 is not None
        ):
            self.text = (
                f"; engine TTFT so far p50 {whole.ttft_p50 * 1000:.0f} ms, "
                f"p99 {whole.ttft_p99 * 1000:.0f} ms"
            )
        return self.text


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
            run.step_update(
                row,
                progress_done=int(info.get("done") or 0),
                progress_total=max(1, int(info.get("total") or 1)),
                summary=(
                    f"{info.get('done')}/{info.get('total')} prompts, {spent:.0f} s"
                    + engine.line()
                )[:500],
            )
        if time.monotonic() > deadline:
            raise run.fail(
                row, f"no answer within {timeout:.0f}s (BENCH_POINT_TIMEOUT_S)"
            )
        time.sleep(0.25)
    try:
        return result.get(timeout=1, propagate=True, disable_sync_subtasks=False)
    except Exception as exc:  # the agent's own error is the step's evidence
        raise run.fail(row, f"the head's agent answered with an error: {exc}") from None


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
            row, f"the tool's --save-result file is not usable: {exc}"
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
        f"#{stored.pk}: {_figures(stored)}",
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
    row = rows["targets"]
    run.begin(row)
    verdicts = {s.pk: benchmarks.verdict_of(s) for s in stored}
    lines = []
    for s in stored:
        v = verdicts[s.pk]
        word = {True: "ACCEPTED", False: "NOT ACCEPTED", None: "no target"}[v["passed"]]
        checks = "; ".join(
            f"{c['name']} {'pass' if c['passed'] else 'FAIL'}"
            + ("" if c["margin_pct"] is None else f" ({c['margin_pct']:+.1f}%)")
            for c in v["checks"]
        )
        regressed = " REGRESSED against the baseline" if v["regressed"] else ""
        lines.append(
            f"#{s.pk} concurrency {s.max_concurrency or '-'}: {word}{regressed}"
            + (f" — {checks}" if checks else "")
        )
    run.result["verdicts"] = {str(k): v["passed"] for k, v in verdicts.items()}
    judged = [v["passed"] for v in verdicts.values() if v["passed"] is not None]
    if judged and not all(judged):
        raise run.fail(row, "not accepted: " + " | ".join(lines)[:480], lines=lines)
    run.finish(
        row,
        (
            " | ".join(lines)
            if judged
            else "no target at these shapes: " + " | ".join(lines)
        )[:500],
        state=StepState.SUCCEEDED if judged else StepState.WARNING,
        log_tail="\n".join(lines),
    )

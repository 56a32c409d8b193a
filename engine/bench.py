"""Benchmark results in ``vllm bench serve --save-result``'s shape, targets and comparison (pure).

Field names are vLLM's (vllm/benchmarks/serve.py, ``benchmark()``'s ``result`` dict and
``main()``'s additions; printed form in /work/shared/reference/vllm-bench-serve-output.md
§3): ``duration, completed, failed, total_input_tokens, total_output_tokens,
request_throughput, request_goodput, output_throughput, total_token_throughput,
max_output_tokens_per_s, max_concurrent_requests`` and, per metric in
ttft/tpot/itl/e2el, ``mean_X_ms, median_X_ms, std_X_ms, pNN_X_ms``; ``main()`` adds
``date`` ("%Y%m%d-%H%M%S"), ``endpoint_type`` (older: ``backend``), ``label``,
``model_id``, ``tokenizer_id``, ``num_prompts``, ``request_rate`` ("inf" when
unlimited), ``burstiness``, ``max_concurrency``, and any ``--metadata KEY=VALUE``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

REQUIRED = (
    "duration",
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
)
OPTIONAL_NUM = (
    "failed",
    "request_goodput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
)
LATENCY_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")
PER_REQUEST = (
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "generated_texts",
    "errors",
)


class ResultInvalid(ValueError):
    """A result file that is not ``vllm bench serve --save-result`` output; names the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass
class BenchResult:
    """One parsed result: headline figures, latency figures by vLLM key, run parameters."""

    figures: dict[str, float | None]
    latency_ms: dict[str, float]
    date: datetime | None
    label: str = ""
    model_id: str = ""
    num_prompts: int | None = None
    request_rate: float | None = None  # None = inf
    burstiness: float | None = None
    max_concurrency: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def _num(raw: dict[str, Any], key: str, *, required: bool) -> float | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise ResultInvalid(
                key, "missing; is this a `vllm bench serve --save-result` file?"
            )
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ResultInvalid(key, f"must be a number, got {value!r}")
    return float(value)


def parse_result(raw: Any) -> BenchResult:
    """Parse a ``--save-result`` JSON object. Raises ResultInvalid naming the bad field."""
    if not isinstance(raw, dict):
        raise ResultInvalid("(file)", "the top level must be a JSON object")
    figures: dict[str, float | None] = {}
    for key in REQUIRED:
        figures[key] = _num(raw, key, required=True)
    for key in OPTIONAL_NUM:
        figures[key] = _num(raw, key, required=False)
    latency = {}
    for key in raw:
        if LATENCY_KEY.match(key):
            latency[key] = float(_num(raw, key, required=True) or 0.0)
    if not latency:
        raise ResultInvalid(
            "mean_ttft_ms", "no {mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms figures"
        )
    date = None
    if isinstance(raw.get("date"), str):
        try:
            date = datetime.strptime(raw["date"], "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
        except ValueError:
            raise ResultInvalid(
                "date", f"{raw['date']!r} is not %Y%m%d-%H%M%S"
            ) from None
    rate = raw.get("request_rate")
    rate_f = None if rate in (None, "inf", float("inf")) else float(rate)
    conc = raw.get("max_concurrency")
    return BenchResult(
        figures=figures,
        latency_ms=latency,
        date=date,
        label=str(raw.get("label") or ""),
        model_id=str(raw.get("model_id") or ""),
        num_prompts=int(raw["num_prompts"])
        if raw.get("num_prompts") is not None
        else None,
        request_rate=rate_f,
        burstiness=float(raw["burstiness"])
        if raw.get("burstiness") is not None
        else None,
        max_concurrency=int(conc) if conc is not None else None,
        meta={
            k: v
            for k, v in raw.items()
            if k not in PER_REQUEST and not LATENCY_KEY.match(k) and k not in figures
        },
    )


@dataclass(frozen=True)
class Target:
    """A profile's acceptance target at one shape (None = not checked)."""

    concurrency: int
    input_len: int
    output_len: int
    min_output_tps_per_npu: float | None
    max_p99_ttft_ms: float | None
    max_p99_e2el_ms: float | None


@dataclass(frozen=True)
class Check:
    """One figure against its limit: ``margin`` is how far inside (+) or outside (−), in %."""

    name: str
    value: float | None
    limit: float
    higher_is_better: bool
    passed: bool
    margin_pct: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "limit": self.limit,
            "passed": self.passed,
            "margin_pct": self.margin_pct,
        }


def _check(name: str, value: float | None, limit: float, higher: bool) -> Check:
    if value is None:
        return Check(name, None, limit, higher, False, None)
    margin = (
        ((value - limit) if higher else (limit - value)) / limit * 100 if limit else 0.0
    )
    ok = value >= limit if higher else value < limit
    return Check(name, value, limit, higher, ok, round(margin, 2))


def check_target(
    target: Target, *, output_tps_per_npu: float | None, latency_ms: dict[str, float]
) -> list[Check]:
    """The target's checks for one run (empty when the target checks nothing)."""
    checks = []
    if target.min_output_tps_per_npu is not None:
        checks.append(
            _check(
                "output_tps_per_npu",
                output_tps_per_npu,
                target.min_output_tps_per_npu,
                True,
            )
        )
    if target.max_p99_ttft_ms is not None:
        checks.append(
            _check(
                "p99_ttft_ms",
                latency_ms.get("p99_ttft_ms"),
                target.max_p99_ttft_ms,
                False,
            )
        )
    if target.max_p99_e2el_ms is not None:
        checks.append(
            _check(
                "p99_e2el_ms",
                latency_ms.get("p99_e2el_ms"),
                target.max_p99_e2el_ms,
                False,
            )
        )
    return checks


COMPARED = (
    ("output_throughput", True),
    ("total_token_throughput", True),
    ("request_throughput", True),
    ("median_ttft_ms", False),
    ("p99_ttft_ms", False),
    ("median_tpot_ms", False),
    ("p99_tpot_ms", False),
    ("p99_itl_ms", False),
    ("p99_e2el_ms", False),
)


def compare(
    base: dict[str, float | None], other: dict[str, float | None], threshold_pct: float
) -> list[dict[str, Any]]:
    """Figure-by-figure change from ``base`` to ``other``; a change worse than threshold regresses.

    ``base``/``other`` map vLLM keys (headline and latency) to values. Each row:
    name, base, other, delta_pct (+ = larger), regressed.
    """
    rows = []
    for key, higher in COMPARED:
        a, b = base.get(key), other.get(key)
        if a is None or b is None:
            continue
        delta = (b - a) / a * 100 if a else 0.0
        worse = -delta if higher else delta
        rows.append(
            {
                "name": key,
                "base": a,
                "other": b,
                "delta_pct": round(delta, 2),
                "regressed": worse > threshold_pct,
            }
        )
    return rows


def format_table(
    figures: dict[str, Any],
    latency_ms: dict[str, float],
    *,
    max_concurrency: int | None,
) -> str:
    """The result as ``vllm bench serve`` prints it (serve.py's format strings, reference §3)."""
    out = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]

    def line(label: str, value: Any, fmt: str = "") -> None:
        out.append("{:<40} {:<10{f}}".format(label, value, f=fmt))

    line("Successful requests:", int(figures["completed"]))
    line("Failed requests:", int(figures.get("failed") or 0))
    if max_concurrency is not None:
        line("Maximum request concurrency:", max_concurrency)
    line("Benchmark duration (s):", figures["duration"], ".2f")
    line("Total input tokens:", int(figures["total_input_tokens"]))
    line("Total generated tokens:", int(figures["total_output_tokens"]))
    line("Request throughput (req/s):", figures["request_throughput"], ".2f")
    if figures.get("request_goodput") is not None:
        line("Request goodput (req/s):", figures["request_goodput"], ".2f")
    line("Output token throughput (tok/s):", figures["output_throughput"], ".2f")
    if figures.get("max_output_tokens_per_s") is not None:
        line(
            "Peak output token throughput (tok/s):",
            figures["max_output_tokens_per_s"],
            ".2f",
        )
    if figures.get("max_concurrent_requests") is not None:
        line("Peak concurrent requests:", figures["max_concurrent_requests"], ".2f")
    line("Total token throughput (tok/s):", figures["total_token_throughput"], ".2f")
    headers = (
        ("ttft", "TTFT", "Time to First Token"),
        ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
        ("itl", "ITL", "Inter-token Latency"),
        ("e2el", "E2EL", "End-to-end Latency"),
    )
    for key, short, header in headers:
        if f"mean_{key}_ms" not in latency_ms:
            continue
        out.append("{s:{c}^{n}}".format(s=header, n=50, c="-"))
        line(f"Mean {short} (ms):", latency_ms[f"mean_{key}_ms"], ".2f")
        line(f"Median {short} (ms):", latency_ms.get(f"median_{key}_ms", 0.0), ".2f")
        for name, value in sorted(latency_ms.items()):
            m = LATENCY_KEY.match(name)
            if m and m.group(2) == key and m.group(1).startswith("p"):
                line(f"P{m.group(1)[1:]} {short} (ms):", value, ".2f")
    out.append("=" * 50)
    return "\n".join(out)

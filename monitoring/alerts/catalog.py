"""The fixed catalogue of metrics a rule may watch, and the rules seeded from the field guide.

Each metric names where its value comes from in the stored samples; the scope is part
of the metric (a chip figure cannot be a cluster rule). Thresholds default to
``console.constants`` figures of the original guide.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from console.constants import (
    HBM_USAGE_MAX_PCT,
    HCCS_LOSS_MAX_PCT,
    NPU_TEMP_MAX_C,
    P99_LATENCY_MAX_MS,
)


@dataclass(frozen=True)
class Metric:
    key: str
    scope: str
    label: str | Promise
    unit: str = ""


METRICS: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric(
            "chip.temp_c", "chip", _("NPU temperature (latest npu-smi sample)"), "°C"
        ),
        Metric("chip.hbm_used_pct", "chip", _("NPU HBM used"), "%"),
        Metric(
            "chip.hccs_loss_pct",
            "chip",
            _("HCCS loss of the chip's worst link over the last window"),
            "%",
        ),
        Metric("chip.health_bad", "chip", _("NPU health not OK (1 = bad)")),
        Metric(
            "node.hccs_loss_pct",
            "node",
            _("HCCS loss of the node's worst link over the last window"),
            "%",
        ),
        Metric(
            "node.roce_down", "node", _("RoCE ports DOWN or net_health failing (count)")
        ),
        Metric(
            "nic.roce_down", "nic", _("RoCE port DOWN or net_health failing (1 = bad)")
        ),
        Metric(
            "node.unreachable", "node", _("Collect intervals missed by the node agent")
        ),
        Metric(
            "node.engine_failed",
            "node",
            _("Engine process on the node exited or failed (1 = bad)"),
        ),
        Metric(
            "engine.stalled",
            "cluster",
            _(
                "Requests running but no token generated in the last window (1 = stalled)"
            ),
        ),
        Metric(
            "engine.health_failing",
            "cluster",
            _("Engine /health not 200 or /metrics not answering (1 = failing)"),
        ),
        Metric(
            "engine.gateway_errors",
            "cluster",
            _(
                "Engine errors the gateway saw since the last round (refused, broken, 5xx)"
            ),
        ),
        Metric("engine.ttft_p99_ms", "cluster", _("P99 time to first token"), "ms"),
        Metric(
            "engine.e2e_p99_ms", "cluster", _("P99 end-to-end request latency"), "ms"
        ),
        Metric("engine.waiting", "cluster", _("Requests waiting")),
        Metric(
            "cluster.gate_failed",
            "cluster",
            _("Correctness gate failed after a start or on demand (1 = failed)"),
        ),
        Metric("engine.kv_cache_pct", "cluster", _("KV cache usage"), "%"),
        Metric(
            "engine.kv_cache_pct_preempting",
            "cluster",
            _("KV cache usage while preemptions rise (0 when none)"),
            "%",
        ),
        Metric("engine.rank_waiting", "engine", _("Requests waiting on one DP rank")),
        Metric(
            "engine.rank_kv_cache_pct",
            "engine",
            _("KV cache usage of one DP rank"),
            "%",
        ),
    )
}

# Seeded by migration 0002 (plain data: migrations must not import live models).
DEFAULT_RULES: list[dict[str, object]] = [
    {
        "name": "NPU temperature high",
        "metric": "chip.temp_c",
        "comparison": "gt",
        "threshold": NPU_TEMP_MAX_C,
        "resolve_threshold": 80.0,
        "for_s": 10,
        "severity": "warning",
    },
    {
        "name": "NPU HBM usage high",
        "metric": "chip.hbm_used_pct",
        "comparison": "gt",
        "threshold": HBM_USAGE_MAX_PCT,
        "resolve_threshold": 88.0,
        "for_s": 10,
        "severity": "warning",
    },
    {
        "name": "HCCS link loss",
        "metric": "node.hccs_loss_pct",
        "comparison": "gt",
        "threshold": HCCS_LOSS_MAX_PCT,
        "resolve_threshold": 5.0,
        "for_s": 0,
        "severity": "critical",
        "remediation_policy": "auto",
        "remediation_action": "failover",
    },
    {
        "name": "NPU health not OK",
        "metric": "chip.health_bad",
        "comparison": "ge",
        "threshold": 1.0,
        "for_s": 0,
        "severity": "critical",
    },
    {
        "name": "RoCE NIC down",
        "metric": "node.roce_down",
        "comparison": "ge",
        "threshold": 1.0,
        "for_s": 0,
        "severity": "critical",
    },
    {
        "name": "Node agent unreachable",
        "metric": "node.unreachable",
        "comparison": "ge",
        "threshold": 3.0,
        "resolve_threshold": 1.0,
        "for_s": 0,
        "severity": "critical",
    },
    {
        "name": "Engine process failed",
        "metric": "node.engine_failed",
        "comparison": "ge",
        "threshold": 1.0,
        "for_s": 0,
        "severity": "critical",
        "remediation_policy": "auto",
        "remediation_action": "restart",
    },
    {
        "name": "Engine health failing",
        "metric": "engine.health_failing",
        "comparison": "ge",
        "threshold": 1.0,
        "for_s": 5,
        "severity": "critical",
        "remediation_policy": "auto",
        "remediation_action": "restart",
    },
    {
        # issue 19: a live process whose engine makes no progress (hung collective,
        # stuck device) answers /health but generates nothing; restart it like a crash
        "name": "Engine stalled",
        "metric": "engine.stalled",
        "comparison": "ge",
        "threshold": 1.0,
        "for_s": 30,
        "severity": "critical",
        "remediation_policy": "auto",
        "remediation_action": "restart",
    },
    {
        # the field guide's third engine-down signal: clients getting errors from the engine
        "name": "Gateway sees engine errors",
        "metric": "engine.gateway_errors",
        "comparison": "ge",
        "threshold": 3.0,
        "resolve_threshold": 1.0,
        "for_s": 0,
        "severity": "critical",
        "remediation_policy": "auto",
        "remediation_action": "restart",
    },
    {
        "name": "P99 TTFT over target",
        "metric": "engine.ttft_p99_ms",
        "comparison": "gt",
        "threshold": P99_LATENCY_MAX_MS,
        "resolve_threshold": 700.0,
        "for_s": 30,
        "severity": "warning",
    },
    {
        "name": "P99 end-to-end latency over target",
        "metric": "engine.e2e_p99_ms",
        "comparison": "gt",
        "threshold": P99_LATENCY_MAX_MS,
        "resolve_threshold": 700.0,
        "for_s": 30,
        "severity": "warning",
    },
    {
        "name": "Requests waiting",
        "metric": "engine.waiting",
        "comparison": "gt",
        "threshold": 32.0,
        "resolve_threshold": 8.0,
        "for_s": 30,
        "severity": "warning",
    },
    {
        "name": "KV cache pressure with preemptions",
        "metric": "engine.kv_cache_pct_preempting",
        "comparison": "gt",
        "threshold": 90.0,
        "resolve_threshold": 80.0,
        "for_s": 30,
        "severity": "warning",
        "remediation_policy": "ask",
        "remediation_action": "scale_out",
    },
]

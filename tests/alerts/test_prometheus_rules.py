"""deploy/prometheus/alert-rules.yml is a valid rule file and covers the console's seeded rules."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from monitoring.alerts.catalog import DEFAULT_RULES

RULES = (
    Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alert-rules.yml"
)
# console metric → the Prometheus alert that watches the same thing (node.engine_failed has no exported series)
EQUIVALENT = {
    "chip.temp_c": "NpuTemperatureHigh",
    "chip.hbm_used_pct": "NpuHbmHigh",
    "node.hccs_loss_pct": "HccsLinkLoss",
    "chip.health_bad": "NpuUnhealthy",
    "node.roce_down": "RoceLinkDown",
    "node.unreachable": "NodesUnreachable",
    "engine.health_failing": "EngineHealthFailing",
    "engine.gateway_errors": "GatewaySeesEngineErrors",
    "engine.stalled": "EngineStalled",
    "engine.ttft_p99_ms": "EngineP99LatencyHigh",
    "engine.e2e_p99_ms": "EngineP99LatencyHigh",
    "engine.waiting": "EngineRequestsWaiting",
    "engine.kv_cache_pct_preempting": "KvCachePressure",
}
DURATION = re.compile(r"^\d+(ms|s|m|h|d)$")


def test_it_is_a_valid_prometheus_rule_file() -> None:
    doc = yaml.safe_load(RULES.read_text())
    names = set()
    for group in doc["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit"}
        for rule in group["rules"]:
            assert set(rule) <= {
                "alert",
                "expr",
                "for",
                "labels",
                "annotations",
                "keep_firing_for",
            }
            assert rule["alert"] not in names and re.fullmatch(
                r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"]
            )
            names.add(rule["alert"])
            assert rule["expr"].strip() and rule["expr"].count("(") == rule[
                "expr"
            ].count(")")
            assert DURATION.match(str(rule.get("for", "0s"))), rule["alert"]
            assert rule["labels"]["severity"] in {"info", "warning", "critical"}


def test_it_covers_every_seeded_console_rule() -> None:
    doc = yaml.safe_load(RULES.read_text())
    alerts = {r["alert"]: r for g in doc["groups"] for r in g["rules"]}
    for spec in DEFAULT_RULES:
        metric = str(spec["metric"])
        if metric == "node.engine_failed":
            continue
        assert EQUIVALENT[metric] in alerts, metric
    assert (
        "> 32" in alerts["EngineRequestsWaiting"]["expr"]
        and "> 90" in alerts["KvCachePressure"]["expr"]
    )

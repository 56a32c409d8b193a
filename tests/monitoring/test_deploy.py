"""deploy/: the Prometheus config and alert rules parse, and the Grafana dashboard uses names the exporter emits."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from monitoring import exporter

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_it_ships_a_scrape_config_for_the_console_and_the_engines() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert (
        jobs["ascend-console"]["authorization"]["type"] == "Bearer"
        and jobs["vllm-engines"]["metrics_path"] == "/metrics"
    )
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alert-rules.yml").read_text())
    exprs = " ".join(r["expr"] for g in rules["groups"] for r in g["rules"])
    assert "> 85" in exprs and "> 92" in exprs and "> 15" in exprs and "> 0.8" in exprs


def test_it_builds_grafana_panels_from_exported_names() -> None:
    dashboard = json.loads(
        (DEPLOY / "grafana" / "ascend-vllm-console.json").read_text()
    )
    titles = [p["title"] for p in dashboard["panels"] if p["type"] == "timeseries"]
    for needle in (
        "Queue",
        "Time to first token",
        "Inter-token",
        "Throughput",
        "KV-cache",
        "temperature",
        "HBM",
        "HCCS",
    ):
        assert any(needle in t for t in titles), needle
    exprs = " ".join(
        t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])
    )
    source = "".join(  # the exporter package: npu-exporter families and console health
        p.read_text() for p in sorted(Path(exporter.__file__).parent.glob("*.py"))
    )
    for name in set(re.findall(r"\b((?:npu_chip|console)_[a-z_]+)", exprs)):
        assert name in source or name.startswith("npu_chip_roce_"), (
            name
        )  # roce names come from the -stat counter keys

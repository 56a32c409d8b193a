"""/metrics: valid Prometheus text with npu-exporter names and labels, the console's own metrics, token protection."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from monitoring.exporter import health_value
from monitoring.ingest import NodeResult, ingest_round
from tests.monitoring.samples import agent_sample

pytestmark = pytest.mark.django_db
TOKEN = "s3cret-token"


def samples_by_name(text: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


@pytest.fixture
def ingested(cluster: Any) -> Any:
    nodes = cluster.ranked_nodes()
    alarm = agent_sample("ascend-02")
    alarm["chips"][7]["health"] = "Alarm"
    alarm["roce"][2]["link"] = "DOWN"
    ingest_round(
        nodes=[
            NodeResult(nodes[0].pk, sample=agent_sample("ascend-01")),
            NodeResult(nodes[1].pk, sample=alarm),
        ],
        scrapes=[],
    )
    return cluster


@override_settings(METRICS_TOKEN=TOKEN, METRICS_PUBLIC=False)
def test_it_exposes_npu_exporter_names_and_labels(ingested: Any) -> None:
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200 and response["Content-Type"].startswith(
        "text/plain; version=0.0.4"
    )
    samples = samples_by_name(response.content.decode())
    temps = samples["npu_chip_info_temperature"]
    assert len(temps) == 16
    first = next(
        s for s in temps if s.labels["node"] == "ascend-01" and s.labels["id"] == "0"
    )
    assert first.value == 40.0
    assert {"id", "model_name", "pcie_bus_info", "node", "cluster", "rank"} <= set(
        first.labels
    )
    assert (
        first.labels["model_name"] == "910B3"
        and first.labels["pcie_bus_info"] == "0000:C1:00.0"
    )
    assert first.labels["cluster"] == "qwen35-prod" and first.labels["rank"] == "0"
    for name in (
        "npu_chip_info_power",
        "npu_chip_info_hbm_used_memory",
        "npu_chip_info_hbm_total_memory",
        "npu_chip_info_utilization",
        "npu_chip_info_health_status",
        "npu_chip_info_link_status",
        "npu_chip_roce_tx_err_pkt_num",
        "npu_chip_roce_new_pkt_rty_num",
        "npu_chip_info_hccs_statistic_info_tx_cnt_0",
        "npu_chip_info_hccs_statistic_info_rx_cnt_6",
        "npu_chip_info_hccs_statistic_info_crc_err_cnt_6",
    ):
        assert len(samples[name]) == 16, name
    health = {
        (s.labels["node"], s.labels["id"]): s.value
        for s in samples["npu_chip_info_health_status"]
    }
    assert health[("ascend-02", "7")] == 0 and health[("ascend-01", "7")] == 1
    link = {
        (s.labels["node"], s.labels["id"]): s.value
        for s in samples["npu_chip_info_link_status"]
    }
    assert link[("ascend-02", "2")] == 0 and link[("ascend-02", "3")] == 1
    assert samples["npu_chip_info_hccs_statistic_info_tx_cnt_0"][0].value == 1843920561
    nodes = {s.labels["state"]: s.value for s in samples["console_nodes"]}
    assert nodes["ready"] == 2
    assert (
        samples["console_ingest_lag_seconds"][0].value >= 0
        and samples["console_samples_per_second"][0].value > 0
    )
    assert "console_operations" not in samples or all(
        "state" in s.labels for s in samples["console_operations"]
    )


@override_settings(METRICS_TOKEN=TOKEN, METRICS_PUBLIC=False)
def test_it_refuses_a_missing_or_wrong_token(ingested: Any) -> None:
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer nope").status_code == 401


@override_settings(METRICS_TOKEN=None, METRICS_PUBLIC=False)
def test_it_is_off_without_a_token_unless_public(ingested: Any) -> None:
    response = Client().get("/metrics")
    assert response.status_code == 403 and b"METRICS_TOKEN" in response.content
    with override_settings(METRICS_PUBLIC=True):
        assert Client().get("/metrics").status_code == 200


def test_it_maps_health_like_npu_exporter() -> None:
    assert [
        health_value(h) for h in ("OK", "Warning", "Alarm", "Critical", "", None)
    ] == [1, 0, 0, 0, -1, -1]


def test_it_exports_the_hccs_loss_state_so_no_traffic_is_not_a_gap(
    ingested: Any,
) -> None:
    nodes = ingested.ranked_nodes()
    ingest_round(
        nodes=[NodeResult(nodes[0].pk, sample=agent_sample("ascend-01"))], scrapes=[]
    )
    with override_settings(METRICS_TOKEN=TOKEN, METRICS_PUBLIC=False):
        text = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    states = {
        (s.labels["node"], s.labels["state"]): s.value
        for s in samples_by_name(text.content.decode())["console_hccs_loss_state"]
    }
    assert states[("ascend-01", "no_traffic")] == 1.0  # idle: no percentage at all
    assert states[("ascend-02", "no_baseline")] == 1.0

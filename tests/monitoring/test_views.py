"""Dashboards: viewers (and up) see them, users without a role do not; chart windows come back aligned and bounded."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from monitoring.ingest import NodeResult, ScrapeResult, ingest_round
from monitoring.models import Rollup
from monitoring.rollup import rollup_and_prune
from monitoring.selectors import MAX_POINTS, chart_window
from tests.conftest import login
from tests.monitoring.samples import VLLM, agent_sample

pytestmark = pytest.mark.django_db


def fill(cluster: Any, rounds: int = 3, step_s: float = 5.0, start: Any = None) -> Any:
    nodes = cluster.ranked_nodes()
    t = start or timezone.now() - timedelta(seconds=rounds * step_s)
    texts = [
        (VLLM / "metrics-0.33.0-t0.txt").read_text(),
        (VLLM / "metrics-0.33.0-t1.txt").read_text(),
    ]
    for i in range(rounds):
        ts = t + timedelta(seconds=i * step_s)
        scrape = ScrapeResult(
            cluster.pk,
            "http://127.0.0.1:8000/metrics",
            ts.timestamp(),
            text=texts[i % 2],
            health=200,
        )
        ingest_round(
            nodes=[NodeResult(n.pk, sample=agent_sample(n.name)) for n in nodes],
            scrapes=[scrape],
            started_at=ts,
        )
    return t


def test_it_shows_the_dashboard_to_a_viewer(cluster: Any, viewer: Any) -> None:
    fill(cluster, rounds=1)
    response = login(viewer).get(f"/monitoring/clusters/{cluster.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('class="heat-cell"') == 32 and 'id="heat-ascend-04-7-0"' in html
    assert (
        'id="chart-ttft"' in html
        and 'id="dashboard-config"' in html
        and 'id="mon-state-ascend-01"' in html
    )


def test_it_refuses_a_user_without_a_role(cluster: Any, norole: Any) -> None:
    assert login(norole).get(f"/monitoring/clusters/{cluster.pk}/").status_code == 403
    assert (
        login(norole).get(f"/monitoring/clusters/{cluster.pk}/series").status_code
        == 403
    )


def test_it_sends_anonymous_users_to_login(cluster: Any) -> None:
    from django.test import Client

    response = Client().get(f"/monitoring/clusters/{cluster.pk}/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_it_returns_an_aligned_chart_window(cluster: Any, operator: Any) -> None:
    fill(cluster, rounds=4)
    data = (
        login(operator)
        .get(f"/monitoring/clusters/{cluster.pk}/series?range=15m&node=ascend-02")
        .json()
    )
    eng = data["engine"]
    assert (
        len(eng["t"]) == 4
        and len(eng["ttft_p99"]) == 4
        and eng["running"][-1] in (3.0, 8.0)
    )
    assert any(v is not None for v in eng["ttft_p99"])
    ns = data["node_series"]
    assert (
        ns["chips"] == [f"{i}.0" for i in range(8)]
        and len(ns["temp"]) == 8
        and len(ns["temp"][0]) == 4
    )
    assert ns["temp"][0][0] == 40.0


def test_it_backfills_only_what_came_after_since(cluster: Any, admin: Any) -> None:
    t = fill(cluster, rounds=4)
    since = (t + timedelta(seconds=5)).timestamp()
    data = (
        login(admin)
        .get(f"/monitoring/clusters/{cluster.pk}/series?range=15m&since={since}")
        .json()
    )
    assert len(data["engine"]["t"]) == 2 and min(data["engine"]["t"]) > since


def test_it_rejects_an_unknown_range(cluster: Any, viewer: Any) -> None:
    response = login(viewer).get(f"/monitoring/clusters/{cluster.pk}/series?range=7y")
    assert response.status_code == 400 and "range" in response.json()["error"]


def test_it_rolls_up_minutes_and_reads_them_for_long_ranges(cluster: Any) -> None:
    start = (timezone.now() - timedelta(minutes=5)).replace(second=0, microsecond=0)
    fill(cluster, rounds=24, step_s=5.0, start=start)  # two full minutes
    result = rollup_and_prune()
    assert result["minutes"] == 2
    temp = Rollup.objects.filter(
        series="chip.temp_c", node__name="ascend-01", key="0.0"
    )
    assert temp.count() == 2 and temp.first().n == 12 and temp.first().avg == 40.0
    assert Rollup.objects.filter(series="engine.ttft_p99", key="all").exists()
    window = chart_window(cluster, range_s=86400, node=cluster.ranked_nodes()[0])
    assert (
        window["source"] == "rollup"
        and len(window["engine"]["t"]) == 2
        and len(window["node_series"]["t"]) == 2
    )
    assert rollup_and_prune()["minutes"] == 0  # nothing new to roll up


def test_it_prunes_raw_samples_past_retention(cluster: Any) -> None:
    from monitoring.models import ChipSample

    fill(cluster, rounds=1, start=timezone.now() - timedelta(hours=30))
    fill(cluster, rounds=1)
    rollup_and_prune()
    assert (
        ChipSample.objects.filter(ts__lt=timezone.now() - timedelta(hours=24)).count()
        == 0
    )
    assert ChipSample.objects.count() == 32


def test_it_downsamples_long_raw_windows(cluster: Any) -> None:
    from monitoring.selectors import _downsample

    ts = [float(i) for i in range(10_000)]
    out_ts, cols = _downsample(ts, {"a": [1.0] * 10_000}, MAX_POINTS)
    assert len(out_ts) <= MAX_POINTS and cols["a"][0] == 1.0


def test_node_cards_count_the_nodes_active_alerts(cluster: Any, viewer: Any) -> None:
    import re

    from django.utils import timezone

    from monitoring.alerts.services import alert_rules_seed
    from monitoring.models.alerts import Alert, AlertRule

    fill(cluster, rounds=1)
    alert_rules_seed()
    node = cluster.nodes.get(name="ascend-03")
    rule = AlertRule.objects.get(name="NPU temperature high")
    now = timezone.now()
    for state in ("firing", "acknowledged", "resolved"):  # resolved ones do not count
        Alert.objects.create(
            rule=rule,
            cluster=cluster,
            node=node,
            target=f"ascend-03/npu{len(state)}",
            state=state,
            severity="warning",
            fault_onset_at=now,
            pending_at=now,
        )
    html = login(viewer).get(f"/monitoring/clusters/{cluster.pk}/").content.decode()

    def cell(dd_id: str) -> str:
        found = re.search(rf'id="{dd_id}"[^>]*>(.*?)</dd>', html, re.S)
        assert found, dd_id
        return re.sub(r"<[^>]+>", "", found.group(1)).strip()

    assert cell("mon-alerts-ascend-03") == "2"
    assert cell("mon-alerts-ascend-01") == "0"
    assert cell("mon-errors-ascend-03") == "0"


def test_chart_lines_follow_the_alert_rules(cluster: Any, viewer: Any) -> None:
    import json
    import re

    from monitoring.alerts.services import alert_rules_seed
    from monitoring.models.alerts import AlertRule

    alert_rules_seed()

    def config() -> dict[str, Any]:
        html = login(viewer).get(f"/monitoring/clusters/{cluster.pk}/").content.decode()
        found = re.search(
            r'<script id="dashboard-config"[^>]*>(.*?)</script>', html, re.S
        )
        assert found
        return json.loads(found.group(1))["thresholds"]

    seeded = config()
    assert seeded["temp_c"] == 85.0 and seeded["kv_cache_pct"] == 90.0
    assert seeded["p99_latency_s"] == 0.8 and seeded["itl_p99_s"] is None
    AlertRule.objects.filter(metric="chip.temp_c").update(threshold=80.0)
    AlertRule.objects.create(  # a tighter rule for this cluster only wins
        name="HBM tight on prod",
        metric="chip.hbm_used_pct",
        comparison="gt",
        threshold=95.0,
        cluster=cluster,
    )
    AlertRule.objects.filter(metric="node.hccs_loss_pct").update(enabled=False)
    edited = config()
    assert edited["temp_c"] == 80.0
    assert edited["hbm_pct"] == 95.0  # own cluster's rule over the global 92
    assert edited["hccs_loss_pct"] is None  # disabled rule: no line


def test_it_returns_an_absolute_window_with_power_and_per_chip_links(
    cluster: Any, viewer: Any
) -> None:
    t = fill(cluster, rounds=4)
    frm, to = t.timestamp() - 1, (t + timedelta(seconds=7)).timestamp()
    data = (
        login(viewer)
        .get(
            f"/monitoring/clusters/{cluster.pk}/series?from={frm}&to={to}&node=ascend-02"
        )
        .json()
    )
    assert len(data["engine"]["t"]) == 2 and max(data["engine"]["t"]) <= to
    ns = data["node_series"]
    assert len(ns["t"]) == 2 and len(ns["power"]) == 8 and len(ns["power"][0]) == 2
    assert ns["power"][0][0] is not None
    assert len(ns["chip_loss"]) == 8 and len(ns["roce_down"]) == 2


@pytest.mark.parametrize(
    "query", ["from=10&to=5", "from=abc&to=5", "from=10", f"from=1&to={10**10}"]
)
def test_it_rejects_a_bad_absolute_window(
    cluster: Any, viewer: Any, query: str
) -> None:
    response = login(viewer).get(f"/monitoring/clusters/{cluster.pk}/series?{query}")
    assert response.status_code == 400 and "from" in response.json()["error"]


def test_the_node_page_says_no_traffic_and_what_a_link_fault_leads_to(
    cluster: Any, viewer: Any
) -> None:
    """Issue 13: on an idle node the loss is 'no traffic', never a blank or 0 %; the page
    says, for this server model, what the console does about an HCCS fault."""
    from django.utils import timezone

    from monitoring.models import NodeLatest

    node = cluster.ranked_nodes()[0]
    NodeLatest.objects.create(
        node=node,
        ts=timezone.now(),
        data={"hccs_loss_pct": None, "hccs_loss_state": "no_traffic", "chips": []},
    )
    page = login(viewer).get(f"/nodes/{node.name}/", HTTP_ACCEPT_LANGUAGE="en")
    body = page.content.decode()
    assert page.status_code == 200
    assert 'data-state="no_traffic"' in body and "no traffic" in body
    assert "Link faults on this server" in body
    assert "Engine release and model files" in body

"""Ingest of real-format agent output and /metrics expositions; stale/unreachable; errors kept with raw text."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from console.models import Node, NodeState
from engine.parsers import ParseError
from engine.parsers.npu_smi import parse_info
from monitoring.ingest import (
    NodeResult,
    ScrapeResult,
    ingest_round,
    node_staleness_update,
)
from monitoring.models import (
    ChipSample,
    CollectRound,
    EngineSample,
    NodeLatest,
    NodeSample,
    SampleError,
)
from tests.monitoring.samples import VLLM, agent_sample

pytestmark = pytest.mark.django_db


def members(cluster: Any) -> list[Node]:
    return cluster.ranked_nodes()


def round_of(nodes: list[Node], **samples: Any) -> list[NodeResult]:
    return [
        NodeResult(
            n.pk, sample=samples.get(n.name.replace("-", "_"), agent_sample(n.name))
        )
        for n in nodes
    ]


def test_it_stores_real_format_agent_output_as_rows(
    cluster: Any, django_capture_on_commit_callbacks: Any
) -> None:
    nodes = members(cluster)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        summary = ingest_round(nodes=round_of(nodes), scrapes=[])
    assert summary.nodes_ok == 4 and summary.rows == 32 + 4 and len(callbacks) == 1
    assert ChipSample.objects.count() == 32 and NodeSample.objects.count() == 4
    chip = ChipSample.objects.get(node=nodes[0], npu=0)
    assert (
        chip.temp_c,
        chip.power_w,
        chip.hbm_used_mb,
        chip.hbm_total_mb,
        chip.health,
    ) == (40.0, 100.9, 58626, 65536, "OK")
    assert chip.hccs_loss_pct is None  # no previous sample, no window
    latest = NodeLatest.objects.get(node=nodes[0]).data
    assert (
        len(latest["hccs"]["0.0"]["links"]) == 7 and latest["roce"][0]["link"] == "UP"
    )
    assert latest["roce"][0]["stat"]["roce_tx_err_pkt_num"] >= 0
    assert set(
        Node.objects.filter(pk__in=[n.pk for n in nodes]).values_list(
            "state", flat=True
        )
    ) == {NodeState.READY}
    assert CollectRound.objects.get().nodes_ok == 4
    event = summary.events[cluster.pk]
    assert sorted(event["nodes"]) == [
        "ascend-01",
        "ascend-02",
        "ascend-03",
        "ascend-04",
    ]
    assert (
        len(event["nodes"]["ascend-01"]["chips"]) == 8
        and event["nodes"]["ascend-01"]["state"] == "ready"
    )


def test_it_computes_hccs_loss_of_the_worst_link_over_the_window(cluster: Any) -> None:
    nodes = members(cluster)
    t0 = timezone.now()
    ingest_round(nodes=round_of(nodes), scrapes=[], started_at=t0)
    # NPU 3: 1000 more packets on link 0, 100 retries + 50 CRC errors → 15 %; NPU 5: 1 %.
    second = agent_sample(
        "ascend-01",
        advance={3: (1000, 100, 50), 5: (10_000, 100, 0), 6: (0, 40, 2)},
        engine_state="running",
    )
    summary = ingest_round(
        nodes=round_of(nodes, ascend_01=second),
        scrapes=[],
        started_at=t0 + timedelta(seconds=5),
    )
    rows = {
        c.npu: c.hccs_loss_pct
        for c in ChipSample.objects.filter(node=nodes[0], ts=t0 + timedelta(seconds=5))
    }
    assert (
        rows[3] == pytest.approx(15.0)
        and rows[5] == pytest.approx(1.0)
        and rows[0] is None
    )  # no traffic on NPU 0
    assert (
        rows[6] == 100.0
    )  # errors rising on a link that sends nothing: dead, not idle
    assert NodeSample.objects.get(
        node=nodes[0], ts=t0 + timedelta(seconds=5)
    ).hccs_loss_pct == pytest.approx(100.0)  # the worst link of the node
    assert Node.objects.get(pk=nodes[0].pk).state == NodeState.RUNNING
    assert summary.state_changes == {"ascend-01": "running"}


def test_it_records_parse_errors_with_raw_text_and_ingests_the_rest(
    cluster: Any,
) -> None:
    nodes = members(cluster)
    garbage = "npu-smi: something the parser has never seen\n+-----+\n"
    with pytest.raises(ParseError) as caught:
        parse_info(garbage)
    partial = agent_sample("ascend-02")
    partial["errors"] = [
        {"source": "npu-smi info", "message": str(caught.value), "raw": garbage}
    ]
    broken = agent_sample("ascend-03")
    broken["chips"] = [
        {"chip": 0, "temp_c": "hot"}
    ]  # no npu, and a temperature that is not a number
    results = [
        NodeResult(nodes[0].pk, sample=agent_sample("ascend-01")),
        NodeResult(nodes[1].pk, sample=partial),
        NodeResult(nodes[2].pk, sample=broken),
        NodeResult(nodes[3].pk, error="FileNotFoundError: npu-smi not found"),
    ]
    summary = ingest_round(
        nodes=results,
        scrapes=[
            ScrapeResult(
                cluster.pk, "http://127.0.0.1:9/metrics", 0.0, text="<html>oops</html>"
            )
        ],
    )
    assert summary.nodes_ok == 2
    assert (
        ChipSample.objects.filter(node__in=nodes[:2]).count() == 16
        and not ChipSample.objects.filter(node=nodes[2]).exists()
    )
    errors = {
        e.node.name if e.node else "cluster": e
        for e in SampleError.objects.select_related("node")
    }
    assert (
        errors["ascend-02"].raw == garbage
        and errors["ascend-02"].source == "npu-smi info"
    )
    assert errors["ascend-02"].message == str(caught.value)
    assert (
        '"temp_c": "hot"' in errors["ascend-03"].raw
        and "ascend-03" in errors["ascend-03"].message
    )
    assert "npu-smi not found" in errors["ascend-04"].message
    assert errors["cluster"].raw == "<html>oops</html>" and errors[
        "cluster"
    ].source.startswith("GET http://127.0.0.1:9")


def test_it_marks_silent_nodes_stale_then_unreachable_and_back(cluster: Any) -> None:
    nodes = members(cluster)
    t0 = timezone.now()
    ingest_round(nodes=round_of(nodes), scrapes=[], started_at=t0)
    Node.objects.filter(pk=nodes[1].pk).update(state=NodeState.OUT_OF_SERVICE)
    quiet = [NodeResult(n.pk, sample=agent_sample(n.name)) for n in nodes[:2]] + [
        NodeResult(nodes[2].pk),
        NodeResult(nodes[3].pk),
    ]
    t1 = t0 + timedelta(seconds=settings.STALE_AFTER_S + 1)
    summary = ingest_round(nodes=quiet, scrapes=[], started_at=t1)
    assert summary.state_changes == {"ascend-03": "stale", "ascend-04": "stale"}
    event = summary.events[cluster.pk]["nodes"]["ascend-03"]
    assert (
        event["state"] == "stale"
        and event["last_seen"] == pytest.approx(t0.timestamp())
        and event["chips"] is None
    )
    t2 = t0 + timedelta(seconds=settings.UNREACHABLE_AFTER_S + 1)
    # ascend-01 answered at t1, so at t2 it has been silent for more than STALE_AFTER_S too.
    assert node_staleness_update(now=t2) == {
        "ascend-03": "unreachable",
        "ascend-04": "unreachable",
        "ascend-01": "stale",
    }
    assert (
        Node.objects.get(pk=nodes[1].pk).state == NodeState.OUT_OF_SERVICE
    )  # an operator's mark wins
    back = ingest_round(
        nodes=[NodeResult(nodes[2].pk, sample=agent_sample("ascend-03"))],
        scrapes=[],
        started_at=t2,
    )
    assert back.state_changes == {"ascend-03": "ready"}


def test_it_derives_engine_windows_from_two_scrapes(cluster: Any) -> None:
    t0 = timezone.now()
    url = "http://127.0.0.1:8000/metrics"
    first = ScrapeResult(
        cluster.pk,
        url,
        t0.timestamp(),
        text=(VLLM / "metrics-0.33.0-t0.txt").read_text(),
        health=200,
    )
    ingest_round(nodes=[], scrapes=[first], started_at=t0)
    assert (
        EngineSample.objects.get(engine="all").ttft_p99 is None
    )  # one scrape is no window
    second = ScrapeResult(
        cluster.pk,
        url,
        t0.timestamp() + 5,
        text=(VLLM / "metrics-0.33.0-t1.txt").read_text(),
        health=200,
    )
    summary = ingest_round(
        nodes=[], scrapes=[second], started_at=t0 + timedelta(seconds=5)
    )
    rows = {
        r.engine: r for r in EngineSample.objects.filter(ts=t0 + timedelta(seconds=5))
    }
    assert set(rows) == {"0", "all"}
    assert rows["all"].ttft_p99 == pytest.approx(0.725) and rows[
        "all"
    ].ttft_p50 == pytest.approx(0.25)
    assert (
        rows["0"].gen_tps == pytest.approx(200.0)
        and rows["0"].success["length"] == 10.0
    )
    assert summary.events[cluster.pk]["engine"]["running"] == 8.0


def test_an_engine_whose_health_fails_while_metrics_answer_is_failing(
    cluster: Any,
) -> None:
    """vLLM keeps serving /metrics from the API server when its core engine dies or
    hangs; /health is what says so, and the engine-health rule reads it."""
    from console.models import ClusterState
    from monitoring.alerts.selectors import observations_collect

    Cluster = type(cluster)
    Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.RUNNING)
    url = "http://127.0.0.1:8000/metrics"
    text = (VLLM / "metrics-0.33.0-t0.txt").read_text()

    def round_at(t: Any, health: int | None) -> float:
        ingest_round(
            nodes=[],
            scrapes=[
                ScrapeResult(cluster.pk, url, t.timestamp(), text=text, health=health)
            ],
            started_at=t,
        )
        (obs,) = observations_collect(now=t)["engine.health_failing"]
        return obs.value

    t0 = timezone.now()
    assert round_at(t0, 200) == 0.0
    assert round_at(t0 + timedelta(seconds=5), 503) == 1.0
    error = SampleError.objects.get(source="GET http://127.0.0.1:8000/health")
    assert error.message == "HTTP 503" and error.cluster_id == cluster.pk
    assert EngineSample.objects.filter(engine="all").count() == 2  # metrics still kept
    assert round_at(t0 + timedelta(seconds=10), None) == 1.0  # no answer at all
    assert round_at(t0 + timedelta(seconds=15), 200) == 0.0


def test_hccs_loss_has_an_explicit_state_no_traffic_is_not_zero(cluster: Any) -> None:
    nodes = members(cluster)
    t0 = timezone.now()
    unsupported = {**agent_sample("ascend-04"), "hccs": [], "hccs_unsupported": True}
    ingest_round(
        nodes=round_of(nodes, ascend_04=unsupported), scrapes=[], started_at=t0
    )
    first = NodeLatest.objects.get(node=nodes[0]).data
    assert first["hccs_loss_state"] == "no_baseline" and first["hccs_loss_pct"] is None
    busy = agent_sample("ascend-02", advance={1: (10_000, 200, 0)})
    ingest_round(
        nodes=round_of(nodes, ascend_02=busy, ascend_04=unsupported),
        scrapes=[],
        started_at=t0 + timedelta(seconds=5),
    )
    latest = {lt.node.name: lt.data for lt in NodeLatest.objects.select_related("node")}
    # an idle cluster: nothing sent, so no loss value and the state says why
    assert latest["ascend-01"]["hccs_loss_state"] == "no_traffic"
    assert latest["ascend-01"]["hccs_loss_pct"] is None
    assert latest["ascend-02"]["hccs_loss_state"] == "measured"
    assert latest["ascend-02"]["hccs_loss_pct"] == pytest.approx(2.0)
    # collect()'s hccs_unsupported is read, not lost
    assert latest["ascend-04"]["hccs_loss_state"] == "unsupported"
    assert latest["ascend-04"]["hccs_unsupported"] is True

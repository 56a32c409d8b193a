"""REST telemetry: latest per node and the range query (validation, end clipping)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from monitoring.models import ChipSample, NodeLatest
from tests.conftest import login


def test_latest_and_range(cluster: Any, viewer: Any) -> None:
    node = cluster.ranked_nodes()[0]
    now = timezone.now()
    chip = {
        "npu": 0,
        "chip": 0,
        "temp_c": 51.0,
        "hbm_used_mb": 32000,
        "hbm_total_mb": 64000,
    }
    NodeLatest.objects.create(
        node=node, ts=now, data={"chips": [chip], "hccs_loss_pct": 0.5}
    )
    for minutes, temp in ((10, 40.0), (5, 45.0), (1, 50.0)):
        ChipSample.objects.create(
            node=node,
            ts=now - timedelta(minutes=minutes),
            npu=0,
            chip=0,
            temp_c=temp,
            hbm_used_mb=16000,
            hbm_total_mb=64000,
        )
    c = login(viewer)
    latest = c.get("/api/clusters/qwen35-prod/telemetry/latest/").json()
    first = latest["nodes"][0]
    assert first["node"] == node.name and first["hccs_loss_pct"] == 0.5
    assert first["chips"][0]["temp_c"] == 51.0 and first["chips"][0]["hbm_pct"] == 50.0
    assert len(latest["nodes"]) == len(cluster.ranked_nodes())

    start = (now - timedelta(minutes=15)).isoformat()
    end = (now - timedelta(minutes=3)).isoformat()
    resp = c.get(
        "/api/telemetry/range/", {"node": node.name, "start": start, "end": end}
    )
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["chips"] == ["0.0"] and body["temp"] == [
        [40.0, 45.0]
    ]  # the 1-min-old point is after end
    assert body["hbm"] == [[25.0, 25.0]]

    bad = c.get("/api/telemetry/range/", {"node": "nope", "start": start}).json()
    assert "node" in bad
    bad = c.get(
        "/api/telemetry/range/", {"node": node.name, "start": end, "end": start}
    ).json()
    assert "start" in bad
    bad = c.get(
        "/api/telemetry/range/", {"node": node.name, "start": start, "series": "x"}
    )
    assert bad.status_code == 400 and "series" in bad.json()
    engine = c.get(
        "/api/telemetry/range/", {"node": node.name, "start": start, "series": "engine"}
    )
    assert engine.status_code == 200 and "t" in engine.json()

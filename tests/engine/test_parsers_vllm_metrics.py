"""vLLM /metrics parsing and windowed figures from two real-format expositions (tests/data/vllm/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from engine.parsers import ParseError
from engine.parsers.vllm_metrics import (
    CLUSTER,
    derive,
    histogram_quantile,
    parse_exposition,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm"
T0 = (DATA / "metrics-0.33.0-t0.txt").read_text()
T1 = (DATA / "metrics-0.33.0-t1.txt").read_text()


def two_engines(text: str) -> str:
    """The same exposition for DP ranks 0 and 1 (vLLM prints every engine's series in one family)."""
    lines = text.splitlines()
    out: list[str] = []
    for line in lines:
        out.append(line)
    body = [
        ln.replace('engine="0"', 'engine="1"') for ln in lines if ln.startswith("vllm:")
    ]
    # Append the rank-1 samples directly after their family's rank-0 samples.
    merged: list[str] = []
    i = 0
    for line in out:
        merged.append(line)
        if line.startswith("vllm:") and 'engine="0"' in line:
            merged.append(body[i])
        if line.startswith("vllm:"):
            i += 1
    return "\n".join(merged) + "\n"


def test_it_parses_every_core_series_of_an_engine() -> None:
    engines = parse_exposition(T0)
    assert list(engines) == ["0"]
    snap = engines["0"]
    assert snap.model_name == "Qwen/Qwen3.5-397B-A17B"
    assert snap.gauges == {"running": 3.0, "waiting": 0.0, "kv_cache_usage": 0.0123}
    assert (
        snap.counters["prompt_tokens"] == 4096.0
        and snap.counters["generation_tokens"] == 512.0
    )
    assert snap.success == {
        "stop": 0.0,
        "length": 4.0,
        "abort": 0.0,
        "error": 0.0,
        "repetition": 0.0,
    }
    ttft = snap.histograms["ttft"]
    assert (
        len(ttft.bounds) == 23 and ttft.bounds[-1] == float("inf") and ttft.count == 1.0
    )
    assert set(snap.histograms) == {"ttft", "itl", "e2e"}


def test_it_derives_percentiles_from_bucket_deltas_by_hand() -> None:
    windows = derive(parse_exposition(T0), parse_exposition(T1), 5.0)
    win = windows["0"]
    # TTFT delta: 5 in (0.1,0.25], 4 in (0.25,0.5], 1 in (0.5,0.75]; 10 in all.
    assert win.ttft_p50 == pytest.approx(
        0.1 + 0.15 * 5 / 5
    )  # rank 5 ends the first bucket: 0.25
    assert win.ttft_p95 == pytest.approx(0.5 + 0.25 * (9.5 - 9) / 1)  # 0.625
    assert win.ttft_p99 == pytest.approx(0.5 + 0.25 * (9.9 - 9) / 1)  # 0.725
    # e2e delta: 10 in (2.5, 5].
    assert win.e2e_p50 == pytest.approx(2.5 + 2.5 * 5 / 10)
    assert win.e2e_p99 == pytest.approx(2.5 + 2.5 * 9.9 / 10)
    assert win.itl_p50 is None  # no inter-token samples in the window
    assert win.gen_tps == pytest.approx(1000 / 5) and win.prompt_tps == pytest.approx(
        5120 / 5
    )
    assert win.prefix_hit_pct == pytest.approx(50.0)
    assert win.success["length"] == 10.0 and win.requests_ps == pytest.approx(2.0)
    assert (win.running, win.waiting, win.kv_cache_pct) == (8.0, 2.0, 25.0)
    assert windows[CLUSTER].ttft_p99 == pytest.approx(0.725)


def test_it_aggregates_engines_by_summing_bucket_deltas() -> None:
    prev, cur = parse_exposition(two_engines(T0)), parse_exposition(two_engines(T1))
    assert sorted(cur) == ["0", "1"]
    windows = derive(prev, cur, 5.0)
    cluster = windows[CLUSTER]
    assert cluster.running == 16.0 and cluster.gen_tps == pytest.approx(400.0)
    assert cluster.ttft_p50 == pytest.approx(0.25)  # 20 observations, same shape
    assert cluster.success["length"] == 20.0


def test_it_treats_a_decrease_as_a_counter_reset() -> None:
    windows = derive(parse_exposition(T1), parse_exposition(T0), 5.0)
    win = windows["0"]
    assert win.reset is True
    assert win.gen_tps == pytest.approx(
        512 / 5
    )  # after a restart the new total is the increase
    assert win.ttft_p50 == pytest.approx(
        0.25 + 0.25 * 0.5
    )  # the single request in (0.25, 0.5]


def test_it_has_no_rates_on_the_first_scrape() -> None:
    win = derive(None, parse_exposition(T0), 5.0)["0"]
    assert win.window_s is None and win.ttft_p99 is None and win.gen_tps is None
    assert win.running == 3.0


def test_it_matches_histogram_quantile_on_a_prometheus_client_histogram() -> None:
    registry = CollectorRegistry()
    hist = Histogram("x_seconds", "x", buckets=(0.1, 0.2, 0.4, 0.8), registry=registry)
    for value in [0.05] * 10 + [0.15] * 60 + [0.3] * 25 + [0.5] * 5:
        hist.observe(value)
    text = (
        generate_latest(registry)
        .decode()
        .replace("x_seconds", "vllm:e2e_request_latency_seconds")
    )
    h = parse_exposition(text)["0"].histograms["e2e"]
    assert histogram_quantile(0.5, h.bounds, h.cumulative) == pytest.approx(
        0.1 + 0.1 * (50 - 10) / 60
    )
    assert histogram_quantile(0.99, h.bounds, h.cumulative) == pytest.approx(
        0.4 + 0.4 * (99 - 95) / 5
    )
    assert histogram_quantile(0.5, [1.0, float("inf")], [0.0, 0.0]) is None


def test_it_returns_the_highest_finite_bound_for_a_rank_in_inf() -> None:
    assert histogram_quantile(0.99, [1.0, 2.0, float("inf")], [0.0, 1.0, 10.0]) == 2.0


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "<html>502 Bad Gateway</html>",
        "# HELP x y\n# TYPE x gauge\nx 1\n",
        "vllm:num_requests_running{engine=0 1",
    ],
)
def test_it_rejects_garbage(garbage: str) -> None:
    with pytest.raises(ParseError):
        parse_exposition(garbage)


def test_it_round_trips_snapshots_through_json() -> None:
    import json

    from engine.parsers.vllm_metrics import EngineSnapshot

    snap = parse_exposition(T1)["0"]
    again = EngineSnapshot.from_dict(json.loads(json.dumps(snap.to_dict())))
    assert again == snap

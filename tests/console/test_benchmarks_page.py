"""The Benchmarks pages: list (sweeps grouped), one run, baseline, sweep charts, compare, exports."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from console.models import AuditEvent, BenchmarkRun, Cluster
from console.services.benchmarks import benchmark_import, benchmark_store
from engine import bench
from tests.conftest import login
from tests.factories import make_cluster

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "vllm"
    / "bench-serve-save-result.json"
)
T0 = datetime(2026, 12, 4, 16, 30, tzinfo=UTC)


def raw_result(**changes: Any) -> dict[str, Any]:
    raw = json.loads(FIXTURE.read_text())
    raw.update(changes)
    return raw


def make_run(
    cluster: Cluster | None, *, minutes: int = 0, sweep: str = "", **changes: Any
) -> BenchmarkRun:
    """A run in vLLM's save-result shape, ``minutes`` after T0; a sweep point when ``sweep``."""
    date = (T0 + timedelta(minutes=minutes)).strftime("%Y%m%d-%H%M%S")
    raw = raw_result(date=date, **changes)
    if not sweep:
        return benchmark_import(raw, cluster=cluster)
    return benchmark_store(
        bench.parse_result(raw),
        cluster=cluster,
        tool="vllm bench serve",
        tool_version="0.23.0",
        sweep=sweep,
        input_len=512,
        output_len=256,
        raw=raw,
    )


def get(client: Client, url: str) -> Any:
    return client.get(url, HTTP_ACCEPT_LANGUAGE="en")


def make_sweep(cluster: Cluster, sweep: str = "sw-1") -> list[BenchmarkRun]:
    """Concurrency 1, 8, 32: throughput and latency grow with the load."""
    points = [
        (32, 900.0, 1500.0, 30.0, 9100.0),
        (1, 60.0, 120.0, 16.0, 4200.0),
        (8, 393.3922, 648.2, 18.5, 5262.8),
    ]
    return [
        make_run(
            cluster,
            minutes=i,
            sweep=sweep,
            max_concurrency=conc,
            output_throughput=tps,
            p99_ttft_ms=ttft,
            median_ttft_ms=ttft / 2,
            p99_tpot_ms=tpot,
            p99_e2el_ms=e2el,
        )
        for i, (conc, tps, ttft, tpot, e2el) in enumerate(points)
    ]


def test_it_lists_runs_newest_first_with_their_verdicts(
    cluster: Cluster, viewer: Any
) -> None:
    ok = make_run(cluster, minutes=1)
    slow = make_run(cluster, minutes=2, output_throughput=352.0, p99_ttft_ms=910.0)
    other_shape = make_run(cluster, minutes=3, max_concurrency=1)
    body = get(login(viewer), "/benchmarks/").content.decode()
    rows = [body.index(f'id="bench-run-{r.pk}"') for r in (other_shape, slow, ok)]
    assert rows == sorted(rows)  # newest first
    ok_row = body[rows[2] :]
    assert "ACCEPTED" in ok_row[:3000] and "12.3 tok/s" in ok_row[:3000]
    assert "648 ms" in ok_row[:3000] and "5.26 s" in ok_row[:3000]  # p99 TTFT, p99 E2EL
    assert 'data-verdict="not-accepted"' in body[rows[1] : rows[2]]
    assert (
        'data-verdict="none"' in body[rows[0] : rows[1]]
    )  # no target at concurrency 1
    assert "vllm bench serve" in ok_row[:3000]
    assert 'href="/benchmarks/"' in body and 'id="nav-benchmarks"' in body


def test_it_filters_by_cluster_and_refuses_an_unknown_one_naming_the_field(
    cluster: Cluster, viewer: Any
) -> None:
    mine = make_run(cluster)
    other = make_run(make_cluster("lab-a", nodes=1))
    client = login(viewer)
    body = get(client, "/benchmarks/?cluster=qwen35-prod").content.decode()
    assert f'id="bench-run-{mine.pk}"' in body
    assert f'id="bench-run-{other.pk}"' not in body
    for url in (
        "/benchmarks/?cluster=nope",
        "/benchmarks/export.json?cluster=nope",
        "/benchmarks/export.csv?cluster=nope",
    ):
        response = get(client, url)
        assert response.status_code == 400, url
        assert "cluster" in response.content.decode() and "qwen35-prod" in (
            response.content.decode()
        )
    assert get(client, "/benchmarks/export.json?cluster=nope").json() == {
        "error": {
            "cluster": "no cluster named 'nope'; use one of: lab-a, qwen35-prod, qwen35-standby"
        }
    }
    bad_ids = get(client, "/benchmarks/export.csv?ids=3;4")
    assert bad_ids.status_code == 400 and "ids" in bad_ids.json()["error"]


def test_a_sweep_is_one_row_that_opens_its_points_and_links_its_charts(
    cluster: Cluster, viewer: Any
) -> None:
    points = make_sweep(cluster)
    single = make_run(cluster, minutes=10)
    body = get(login(viewer), "/benchmarks/").content.decode()
    assert body.count('class="sweep-row"') == 1
    assert 'href="/benchmarks/sweep/?sweep=sw-1"' in body
    assert "3 points: 1, 8, 32" in body
    order = [body.index(f'id="bench-run-{r.pk}"') for r in points]
    assert [order[1], order[2], order[0]] == sorted(order)  # lowest load first
    for r in points:
        assert f'id="bench-run-{r.pk}" class="bench-run sweep-point"' in body
    assert f'id="bench-run-{single.pk}" class="bench-run"' in body
    assert body.index(f'id="bench-run-{single.pk}"') < body.index('class="sweep-row"')


def test_the_run_page_shows_vllms_table_the_checks_and_the_plan(
    cluster: Cluster, viewer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(cluster)
    capsys.readouterr()
    call_command("bench", "show", str(run.pk))
    printed = capsys.readouterr().out
    response = get(login(viewer), f"/benchmarks/{run.pk}/")
    body = response.content.decode()
    table = body.split('id="vllm-text">')[1].split("</pre>")[0]
    assert table.strip() and table in printed  # the same figures as `bench show`
    assert "Output token throughput" in body and "393.4 tok/s" in body
    assert (
        '<tr data-key="p99_ttft_ms"><td>P99 TTFT</td><td class="num">648 ms</td>'
        in body
    )
    check = body.split('data-check="output_tps_per_npu"')[1].split("</tr>")[0]
    assert "+2.45 %" in check and "pass" in check and "≥ 12.0 tok/s" in check
    assert run.plan_digest in body and "vllm 0.23.0" in body
    assert 'data-verdict="accepted"' in body
    assert 'id="baseline-form"' not in body  # a viewer cannot mark it


def test_an_operator_marks_a_baseline_and_a_later_run_shows_its_regression(
    cluster: Cluster, viewer: Any, operator: Any
) -> None:
    base = make_run(cluster, output_throughput=420.0)
    assert login(viewer).post(f"/benchmarks/{base.pk}/baseline/").status_code == 403
    assert not BenchmarkRun.objects.get(pk=base.pk).is_baseline
    client = login(operator)
    assert (
        'id="baseline-form"' in get(client, f"/benchmarks/{base.pk}/").content.decode()
    )
    response = client.post(f"/benchmarks/{base.pk}/baseline/", REMOTE_ADDR="10.0.0.9")
    assert (
        response.status_code == 302
        and response["Location"] == f"/benchmarks/{base.pk}/"
    )
    assert BenchmarkRun.objects.get(pk=base.pk).is_baseline
    event = AuditEvent.objects.get(action="benchmark.baseline")
    assert event.actor_name == "otto" and event.source_ip == "10.0.0.9"
    worse = make_run(cluster, minutes=5, output_throughput=395.0)
    body = get(client, f"/benchmarks/{worse.pk}/").content.decode()
    section = body.split('id="regression"')[1].split("</section>")[0]
    assert f"Compared with baseline #{base.pk}" in section
    row = (
        section.split('data-figure="output_throughput"')[0][-40:]
        + section.split('data-figure="output_throughput"')[1].split("</tr>")[0]
    )
    assert "regressed" in row and "-5.95 %" in row
    assert 'data-verdict="not-accepted"' in body
    listing = get(client, "/benchmarks/").content.decode()
    assert listing.count("baseline-mark") == 1


def test_compare_shows_the_figures_side_by_side_and_the_plan_change(
    cluster: Cluster, viewer: Any
) -> None:
    a = make_run(cluster, output_throughput=420.0)
    profile = cluster.profile
    profile.max_num_seqs = 32
    profile.save()
    b = make_run(cluster, minutes=5, output_throughput=395.0)
    client = login(viewer)
    body = get(client, f"/benchmarks/compare/?a={a.pk}&b={b.pk}").content.decode()
    row = body.split('data-figure="output_throughput"')[1].split("</tr>")[0]
    assert "420.0 tok/s" in row and "395.0 tok/s" in row and "-5.95 %" in row
    assert "regressed" in row
    assert "ascend-01: --max-num-seqs &#x27;16&#x27; → &#x27;32&#x27;" in body
    assert 'id="compare-verdict">regressed' in body
    # the list's two ticked checkboxes: the older run is the base
    ticked = get(client, f"/benchmarks/compare/?ids={b.pk}&ids={a.pk}").content.decode()
    assert f'data-a="{a.pk}" data-b="{b.pk}"' in ticked


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("", "a"),
        ("?a=RUN", "b"),
        ("?a=x&b=RUN", "a"),
        ("?a=999999&b=RUN", "a"),
        ("?ids=RUN", "ids"),
    ],
)
def test_compare_refuses_bad_input_naming_the_field(
    cluster: Cluster, viewer: Any, query: str, field: str
) -> None:
    run = make_run(cluster)
    query = query.replace("RUN", str(run.pk))  # its pk: PostgreSQL's ids do not restart
    response = get(login(viewer), f"/benchmarks/compare/{query}")
    assert response.status_code == 400
    assert f'data-field="{field}"' in response.content.decode()


def test_the_sweep_page_passes_sorted_chart_columns(
    cluster: Cluster, viewer: Any
) -> None:
    points = make_sweep(cluster)
    client = login(viewer)
    body = get(client, "/benchmarks/sweep/?sweep=sw-1").content.decode()
    data = json.loads(
        body.split('id="bench-chart-data" type="application/json">')[1].split(
            "</script>"
        )[0]
    )
    assert data["x_kind"] == "concurrency"
    assert data["load"]["x"] == [1.0, 8.0, 32.0]
    assert data["load"]["p99_ttft"] == [120.0, 648.2, 1500.0]
    assert data["load"]["p50_ttft"] == [60.0, 324.1, 750.0]
    assert data["load"]["p99_tpot"] == [16.0, 18.5, 30.0]
    assert data["load"]["output_throughput"] == [60.0, 393.3922, 900.0]
    assert data["latency"]["x"] == [4200.0, 5262.8, 9100.0]
    assert data["latency"]["output_throughput"] == [60.0, 393.3922, 900.0]
    for chart in ("ttft", "tpot", "itl", "throughput", "tradeoff"):
        assert f'id="chart-{chart}"' in body
    ticked = get(client, f"/benchmarks/sweep/?ids={points[0].pk},{points[1].pk}")
    assert ticked.status_code == 200 and "2 ticked runs" in ticked.content.decode()
    missing = get(client, "/benchmarks/sweep/")
    assert (
        missing.status_code == 400 and 'data-field="sweep"' in missing.content.decode()
    )


def test_exports_give_the_filtered_runs_with_vllms_field_names(
    cluster: Cluster, viewer: Any
) -> None:
    points = make_sweep(cluster)
    make_run(make_cluster("lab-b", nodes=1))
    client = login(viewer)
    response = get(client, "/benchmarks/export.json?cluster=qwen35-prod")
    assert 'filename="benchmarks.json"' in response["Content-Disposition"]
    runs = response.json()
    assert sorted(r["id"] for r in runs) == sorted(p.pk for p in points)
    assert {r["cluster"] for r in runs} == {"qwen35-prod"}
    assert runs[0]["p99_ttft_ms"] == 648.2 and runs[0]["sweep"] == "sw-1"
    response = get(client, "/benchmarks/export.csv?cluster=qwen35-prod")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    header = response.content.decode().splitlines()[0].split(",")
    assert header[:6] == [
        "date",
        "model_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
    ]
    for name in (
        "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
        "request_throughput", "request_goodput", "output_throughput",
        "total_token_throughput", "max_concurrent_requests",
        "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "p99_e2el_ms",
        "cluster", "label", "tool", "tool_version", "output_tps_per_npu", "is_baseline",
    ):  # fmt: skip
        assert name in header, name
    assert (
        header.index("mean_ttft_ms")
        < header.index("p99_ttft_ms")
        < header.index("mean_tpot_ms")
    )
    assert len(rows) == 3
    conc8 = next(r for r in rows if r["max_concurrency"] == "8")
    assert conc8["request_rate"] == "inf" and conc8["p99_ttft_ms"] == "648.2"
    assert float(conc8["output_tps_per_npu"]) == pytest.approx(393.3922 / 32)
    assert conc8["tool"] == "vllm bench serve" and conc8["is_baseline"] == "False"
    swept = get(client, "/benchmarks/export.csv?sweep=sw-1").content.decode()
    assert len(swept.strip().splitlines()) == 4


def test_it_needs_a_login_and_a_role(cluster: Cluster, norole: Any) -> None:
    run = make_run(cluster)
    for url in ("/benchmarks/", f"/benchmarks/{run.pk}/", "/benchmarks/export.csv"):
        assert Client().get(url).status_code == 302, url
        assert login(norole).get(url).status_code == 403, url


def test_it_speaks_chinese_by_default(cluster: Cluster, viewer: Any) -> None:
    run = make_run(cluster)
    client = login(viewer)
    listing = client.get("/benchmarks/").content.decode()
    assert "基准测试" in listing and "已验收" in listing
    detail = client.get(f"/benchmarks/{run.pk}/").content.decode()
    assert "输出 token 吞吐量" in detail and "余量" in detail


def test_a_sweep_point_at_another_shape_is_not_judged_against_the_baseline(
    cluster: Cluster, viewer: Any
) -> None:
    points = make_sweep(cluster)
    base = next(p for p in points if p.max_concurrency == 8)
    call_command("bench", "baseline", str(base.pk))
    low = next(p for p in points if p.max_concurrency == 1)
    body = get(login(viewer), f"/benchmarks/{low.pk}/").content.decode()
    assert 'id="other-shape"' in body and 'data-verdict="none"' in body
    listing = get(login(viewer), "/benchmarks/").content.decode()
    sweep_row = listing.split('class="sweep-row"')[1].split("</tr>")[0]
    assert 'data-verdict="accepted"' in sweep_row  # its concurrency-8 point passes


def test_the_list_costs_a_fixed_number_of_queries(
    cluster: Cluster, viewer: Any, django_assert_max_num_queries: Any
) -> None:
    make_sweep(cluster)
    base = make_run(cluster, minutes=20)
    call_command("bench", "baseline", str(base.pk))
    for i in range(12):
        make_run(cluster, minutes=30 + i, output_throughput=380.0 + i)
    client = login(viewer)
    with django_assert_max_num_queries(12):  # session, user, role, runs, baselines, …
        body = get(client, "/benchmarks/").content.decode()
    assert body.count("regressed") >= 1 and body.count('class="bench-run') == 16


def test_a_sweep_the_console_ran_links_its_operation(
    cluster: Cluster, viewer: Any
) -> None:
    from console.models import Operation

    op = Operation.objects.create(cluster=cluster, kind="benchmark", state="succeeded")
    make_sweep(cluster, sweep=f"op{op.pk}")
    BenchmarkRun.objects.update(source="run")
    body = get(login(viewer), f"/benchmarks/sweep/?sweep=op{op.pk}").content.decode()
    assert f'id="sweep-operation" href="/operations/{op.pk}/"' in body
    assert "run by the console" in body


def test_the_run_form_starts_a_benchmark_operation_or_names_the_bad_field(
    operator: Any, viewer: Any
) -> None:
    from console.models import ClusterState, Operation

    cluster = make_cluster("bench-form", nodes=1)
    page = login(operator).get("/benchmarks/").content.decode()
    assert 'id="bench-run-none"' in page  # nothing serving: no form, the reason
    Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.RUNNING)
    page = login(operator).get("/benchmarks/").content.decode()
    assert 'action="/benchmarks/run/"' in page
    assert 'id="bench-run"' not in login(viewer).get("/benchmarks/").content.decode()
    assert (
        login(viewer)
        .post("/benchmarks/run/", {"cluster": cluster.name, "concurrency": "1"})
        .status_code
        == 403
    )

    bad = login(operator).post(
        "/benchmarks/run/",
        {"cluster": cluster.name, "concurrency": "1,eight", "input_len": "64"},
    )
    assert bad.status_code == 400
    assert set(bad.context["run_errors"]) == {"concurrency"}
    assert bad.context["run_form"]["input_len"] == "64"  # what was typed stays
    assert 'data-field="concurrency"' in bad.content.decode()
    assert not Operation.objects.filter(kind="benchmark").exists()

    ok = login(operator).post(
        "/benchmarks/run/",
        {"cluster": cluster.name, "concurrency": "1,8", "output_len": "32"},
    )
    op = Operation.objects.get(kind="benchmark")
    assert ok.status_code == 302 and ok["Location"] == f"/operations/{op.pk}/"
    assert [p["max_concurrency"] for p in op.params["bench"]["points"]] == [1, 8]
    assert {p["output_len"] for p in op.params["bench"]["points"]} == {32}
    assert AuditEvent.objects.filter(
        action__startswith="operation", actor=operator
    ).exists()

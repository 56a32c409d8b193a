"""Property runs over the pages (query strings and forms) and the WebSocket messages of
every socket: whatever arrives, no 5xx and no crashed consumer (SQLite and PostgreSQL;
run this file with DATABASE_URL=postgres://… for the latter). Bounded: ~40 s in all."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.asgi import application
from console.models import Cluster, Operation
from tests.conftest import login
from tests.monitoring.test_consumers import session_headers

NASTY = st.sampled_from(
    [
        "",
        "\x00",
        "a\x00b",
        "1e400",
        "-1e15",
        "1e20",
        "nan",
        "inf",
        "-1",
        "0",
        "99999999999999999999999",
        "2026-13-40T00:00:00",
        "' OR 1=1 --",
        "<script>x</script>",
        "%",
        "\u202e\ufeff",
        "x" * 3000,
    ]
)
VALUES = st.one_of(NASTY, st.text(max_size=40), st.integers().map(str))
PARAMS = st.sampled_from(
    [
        "cluster",
        "node",
        "range",
        "since",
        "page",
        "state",
        "action",
        "kind",
        "q",
        "user",
        "sweep",
        "ids",
        "a",
        "b",
    ]
)
FIELDS = st.sampled_from(
    [
        "kind", "reason", "force", "maintenance_mode", "decision", "hours", "comment",
        "name", "rpm", "tpm", "metric", "threshold", "comparison", "for_s", "severity",
        "labels", "cluster", "enabled", "username", "password", "link_modes",
    ]
)  # fmt: skip
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def world(cluster: Cluster, admin: Any) -> dict[str, Any]:
    from monitoring.alerts.services import alert_rules_seed
    from monitoring.models.alerts import Alert, AlertRule

    alert_rules_seed()
    rule = AlertRule.objects.order_by("pk").first()
    now = timezone.now()
    alert = Alert.objects.create(
        rule=rule, cluster=cluster, target=cluster.name, state="firing",
        severity=rule.severity, fault_onset_at=now, pending_at=now, fired_at=now,
    )  # fmt: skip
    op = Operation.objects.create(cluster=cluster, kind="start")
    return {
        "c": cluster.name,
        "cid": cluster.pk,
        "op": op.pk,
        "alert": alert.pk,
        "rule": rule.pk,
    }


PAGES = [
    "/", "/clusters/{c}/", "/operations/", "/operations/{op}/", "/alerts/",
    "/alerts/{alert}/", "/alerts/incidents/", "/alerts/rules/", "/alerts/rules/new",
    "/alerts/rules/{rule}/edit", "/monitoring/", "/monitoring/clusters/{cid}/",
    "/monitoring/clusters/{cid}/series", "/playground/", "/apikeys/", "/accounts/token/",
    "/api/clusters/", "/api/audit/", "/api/telemetry/range/", "/healthz",
    "/benchmarks/", "/benchmarks/sweep/", "/benchmarks/compare/",
    "/benchmarks/export.json", "/benchmarks/export.csv",
]  # fmt: skip
FORMS = [
    "/clusters/{c}/operations/", "/clusters/{c}/maintenance/", "/operations/{op}/cancel/",
    "/alerts/rules/new", "/alerts/rules/{rule}/edit", "/alerts/{alert}/silence",
    "/alerts/{alert}/ack", "/apikeys/create/", "/accounts/login/",
]  # fmt: skip


@pytest.mark.django_db
def test_no_page_answers_5xx_to_any_query_string(
    world: dict[str, Any], admin: Any
) -> None:
    client = login(admin)

    @given(st.sampled_from(PAGES), st.dictionaries(PARAMS, VALUES, max_size=4))
    @SETTINGS
    def run(path: str, query: dict[str, str]) -> None:
        answer = client.get(path.format(**world), query)
        assert answer.status_code < 500, (path, query, answer.status_code)

    run()


@pytest.mark.django_db
def test_no_page_form_answers_5xx_to_any_input(
    world: dict[str, Any], admin: Any
) -> None:
    client = login(admin)

    @given(
        st.sampled_from(FORMS),
        st.dictionaries(FIELDS, VALUES, max_size=5),
        st.sampled_from(["multipart", "urlencoded"]),
    )
    @SETTINGS
    def run(path: str, form: dict[str, str], encoding: str) -> None:
        url = path.format(**world)
        if encoding == "multipart":
            answer = client.post(url, form)
        else:
            from urllib.parse import urlencode

            answer = client.post(
                url, urlencode(form), content_type="application/x-www-form-urlencoded"
            )
        assert answer.status_code < 500, (path, form, answer.status_code)
        client.force_login(admin)  # a fuzzed /accounts/login/ may have logged us out

    run()


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | NASTY,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
MESSAGES = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["watch", "send", "stop", "nonsense"])},
        optional={
            "cluster": JSONISH, "id": JSONISH, "messages": JSONISH, "max_tokens": JSONISH,
            "temperature": JSONISH, "top_p": JSONISH, "stop": JSONISH, "system": JSONISH,
        },
    ).map(lambda d: json.dumps(d, allow_nan=True)),
    JSONISH.map(lambda v: json.dumps(v, allow_nan=True)),
    st.text(max_size=200),
    st.just("[" * 5000 + "]" * 5000),
)  # fmt: skip


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_no_socket_crashes_on_any_message(world: dict[str, Any], operator: Any) -> None:
    headers = session_headers(operator)
    paths = [
        "/ws/playground/",
        f"/ws/clusters/{world['cid']}/",
        "/ws/alerts/",
        f"/ws/operations/{world['op']}/",
    ]

    async def exchange(path: str, frames: list[str]) -> None:
        comm = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await comm.connect(timeout=5)
        assert connected, (path, code)
        for frame in frames:
            # send_input: send_to refuses an empty frame, which a browser may send
            await comm.send_input({"type": "websocket.receive", "text": frame})
        # until quiet: a crashed consumer re-raises here; a close must be one of ours
        while not await comm.receive_nothing(timeout=0.3):
            out = await comm.receive_output(timeout=2)
            assert out["type"] != "websocket.close", (path, frames, out)
        await comm.disconnect()

    @given(st.sampled_from(paths), st.lists(MESSAGES, min_size=1, max_size=3))
    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
        ],
    )
    def run(path: str, frames: list[str]) -> None:
        async_to_sync(exchange)(path, frames)

    run()

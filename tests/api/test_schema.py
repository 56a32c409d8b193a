"""REST API schema: the OpenAPI document validates, and a bounded schemathesis run
against it (in-process over WSGI, admin token) gets no 5xx from any operation."""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import got_request_exception, request_finished, request_started
from django.db import close_old_connections, transaction
from django.utils import timezone
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup  # a BaseExceptionGroup
from schemathesis.core.result import Ok

from console.models import Cluster, EngineProfile, Operation, OperationState
from tests.conftest import login

# Paths (and methods) the console's clients and docs rely on.
KEY_OPERATIONS = {
    "/api/clusters/": {"get", "post"},
    "/api/clusters/{name}/": {"get", "patch", "delete"},
    "/api/clusters/{name}/operations/": {"get", "post"},
    "/api/clusters/{name}/telemetry/latest/": {"get"},
    "/api/nodes/": {"get", "post"},
    "/api/nodes/{name}/": {"get", "patch", "delete"},
    "/api/profiles/": {"get", "post"},
    "/api/profiles/{id}/": {"get", "patch", "delete"},
    "/api/operations/": {"get"},
    "/api/operations/{id}/": {"get"},
    "/api/operations/{id}/cancel/": {"post"},
    "/api/audit/": {"get"},
    "/api/telemetry/range/": {"get"},
    "/api/tokens/me/": {"post", "delete"},
    "/api/alerts/": {"get"},
    "/api/alerts/{id}/ack/": {"post"},
    "/api/silences/": {"post"},
    "/api/alert-rules/": {"get", "post"},
    "/api/alert-rules/{id}/": {"get", "patch", "delete"},
}
METHODS = ["GET", "POST", "PATCH", "DELETE"]
# Left out: operations whose view waits on a node agent (a Celery round trip to a
# worker that is not running here, up to PREFLIGHT_TIMEOUT_S per call).
EXCLUDED = [("POST", r"^/api/nodes/\{name\}/readmit/$")]
# Everything else is DB-only here: POST /api/clusters/{name}/operations/ queues its
# Celery task with transaction.on_commit, which never fires inside the test's
# transaction (and any task sent is trapped below to prove it). The operations above
# are the floor of what the run must cover.
MIN_OPERATIONS = sum(len(methods) for methods in KEY_OPERATIONS.values())
# Generated cases per operation (positive and negative share it), besides the
# explicit ones below.
EXAMPLES_PER_OPERATION = 12

SCHEMA_URL = "/api/schema/?format=json"


def _schema_doc(admin: Any) -> dict[str, Any]:
    resp = login(admin).get(SCHEMA_URL)
    assert resp.status_code == 200, resp.content[:500]
    assert "openapi" in resp["Content-Type"]
    doc: dict[str, Any] = resp.json()
    return doc


def test_schema_is_valid_openapi_with_the_key_paths(admin: Any) -> None:
    doc = _schema_doc(admin)
    assert doc["openapi"].startswith("3.")
    validate(doc)  # openapi-spec-validator: raises on an invalid document
    paths = doc["paths"]
    for path, methods in KEY_OPERATIONS.items():
        assert path in paths, f"{path} missing from the schema"
        assert methods <= set(paths[path]), (path, sorted(paths[path]))
    token_auth = doc["components"]["securitySchemes"]["tokenAuth"]
    assert token_auth == {
        **token_auth,
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
    }
    # The schema and docs views describe the API; they are not part of it.
    assert not any(p.startswith(("/api/schema", "/api/docs")) for p in paths)


@pytest.fixture
def world(cluster: Cluster, admin: Any) -> dict[str, Any]:
    """Real objects for every path parameter, and some telemetry, for cases to hit."""
    from monitoring.alerts.services import alert_rules_seed
    from monitoring.models import ChipSample, EngineSample, NodeLatest, NodeSample
    from monitoring.models.alerts import Alert, AlertRule

    now = timezone.now()
    alert_rules_seed()
    rules = list(AlertRule.objects.order_by("pk")[:2])
    alert = Alert.objects.create(
        rule=rules[0],
        cluster=cluster,
        target=cluster.name,
        state="firing",
        severity=rules[0].severity,
        fault_onset_at=now,
        pending_at=now,
        fired_at=now,
    )
    done = Operation.objects.create(
        cluster=cluster, kind="start", state=OperationState.SUCCEEDED, finished_at=now
    )
    queued = Operation.objects.create(
        cluster=Cluster.objects.get(name="qwen35-standby"), kind="start"
    )
    head = cluster.ranked_nodes()[0]
    chip = {
        "npu": 0,
        "chip": 0,
        "temp_c": 51.0,
        "hbm_used_mb": 32000,
        "hbm_total_mb": 64000,
    }
    NodeLatest.objects.create(
        node=head, ts=now, data={"chips": [chip], "hccs_loss_pct": 0.5}
    )
    for minutes in (10, 5, 1):
        ts = now - timedelta(minutes=minutes)
        NodeSample.objects.create(node=head, ts=ts, cpu_pct=20.0, hccs_loss_pct=0.1)
        ChipSample.objects.create(
            node=head,
            ts=ts,
            npu=0,
            chip=0,
            temp_c=45.0,
            hbm_used_mb=16000,
            hbm_total_mb=64000,
        )
        EngineSample.objects.create(cluster=cluster, ts=ts, engine="all", running=3.0)
    token = Token.objects.create(user=admin)
    return {
        "auth": {"Authorization": f"Token {token.key}"},
        "path": {
            "/api/clusters/": {"name": ["qwen35-prod", "qwen35-standby"]},
            "/api/nodes/": {"name": [head.name, "ascend-07"]},
            "/api/profiles/": {
                "id": list(EngineProfile.objects.values_list("pk", flat=True)[:2])
            },
            "/api/operations/": {"id": [queued.pk, done.pk]},
            "/api/alerts/": {"id": [alert.pk]},
            "/api/alert-rules/": {"id": [r.pk for r in rules]},
        },
        "query": {"/api/telemetry/range/": {"node": head.name}},
    }


@contextmanager
def _in_process_requests() -> Iterator[list[str]]:
    """Serve requests in this thread without Django closing the test's connection.

    The Django test client does the same: the WSGI handler's close_old_connections
    on request start/finish would close the connection mid-transaction. Yields the
    tracebacks of exceptions the views raised, for the failure report.
    """
    errors: list[str] = []

    def record(sender: Any, **kwargs: Any) -> None:
        errors.append(traceback.format_exc())

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    got_request_exception.connect(record)
    try:
        yield errors
    finally:
        got_request_exception.disconnect(record)
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _strategy(operation: Any, world: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Positive and negative cases; where the path names an object, two in three
    cases name a real one."""

    def both(**fixed: Any) -> st.SearchStrategy[Any]:
        return st.one_of(
            operation.as_strategy(GenerationMode.POSITIVE, **fixed),
            operation.as_strategy(GenerationMode.NEGATIVE, **fixed),
        )

    query = world["query"].get(operation.path)
    generated = both(query=query) if query else both()
    real = next(
        (
            v
            for prefix, v in world["path"].items()
            if operation.path.startswith(prefix + "{")
        ),
        None,
    )
    names = [p.name for p in operation.path_parameters]
    if not (real and names):
        return generated
    (name,) = names
    existing = st.sampled_from(real[name]).flatmap(
        lambda value: both(path_parameters={name: value})
    )
    return st.one_of(generated, existing, existing)


def _explicit(world: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Valid writes, which random data rarely makes (it mostly earns a 400), so the
    deep paths run too."""
    soon = (timezone.now() + timedelta(hours=1)).isoformat()
    profile = EngineProfile.objects.order_by("pk").first()
    assert profile is not None
    return {
        "POST /api/clusters/{name}/operations/": [
            {
                "path_parameters": {"name": "qwen35-prod"},
                "body": {"kind": "start", "reason": "schema run"},
            },
            {
                "path_parameters": {"name": "qwen35-standby"},
                "body": {"kind": "stop"},
            },  # 409: one is queued
        ],
        "POST /api/clusters/": [
            {"body": {"name": "schema-run", "profile": profile.name}}
        ],
        "PATCH /api/clusters/{name}/": [
            {
                "path_parameters": {"name": "qwen35-prod"},
                "body": {"description": "schema run"},
            }
        ],
        "POST /api/silences/": [
            {
                "body": {
                    "target": "qwen35-prod",
                    "ends_at": soon,
                    "comment": "schema run",
                }
            }
        ],
        "POST /api/alert-rules/": [
            {
                "body": {
                    "name": "schema run",
                    "metric": "chip.temp_c",
                    "comparison": "gt",
                    "threshold": 90,
                    "resolve_threshold": 85,
                    "severity": "warning",
                }
            }
        ],
        "GET /api/telemetry/range/": [
            {
                "query": {
                    **world["query"]["/api/telemetry/range/"],
                    "start": "2000-01-01T00:00:00Z",
                    "series": s,
                }
            }
            for s in ("node", "engine")
        ],
    }


def _run_operation(
    operation: Any,
    world: dict[str, Any],
    explicit: list[dict[str, Any]],
    errors: list[str],
) -> int:
    """Hypothesis run of one operation; each case is rolled back: all see the seed
    (a token rotation or a delete never outlives its case)."""
    calls = 0
    auth = world["auth"]

    def check(case: Any) -> None:
        nonlocal calls
        calls += 1
        errors.clear()
        with transaction.atomic():
            try:
                response = case.call(headers=auth)
                try:
                    case.validate_response(
                        response, checks=[not_a_server_error], headers=auth
                    )
                except (Exception, FailureGroup) as exc:
                    for tb in errors:
                        exc.add_note("server traceback:\n" + tb)
                    raise
            finally:
                transaction.set_rollback(True)

    test = given(case=_strategy(operation, world))(check)
    for kwargs in explicit:
        test = example(case=operation.Case(media_type="application/json", **kwargs))(
            test
        )
    settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,  # the same cases on every run: CI stays reproducible
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )(test)()
    return calls


def test_schemathesis_finds_no_server_error(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from celery import Celery

    sent: list[str] = []

    def trap(self: Celery, name: str, *args: Any, **kwargs: Any) -> None:
        sent.append(name)
        raise RuntimeError(f"Celery task {name} sent during the schema run")

    # No background work and no agent call leaves this test (apply_async/delay and
    # agent_call all go through send_task).
    monkeypatch.setattr(Celery, "send_task", trap)

    started = time.monotonic()
    with _in_process_requests() as errors:
        # NUL is generated on every database: PostgreSQL text cannot hold it, and the
        # API must answer 400 for it (console.middleware.RejectNulMiddleware), not 500.
        config = schemathesis.Config.from_dict({"generation": {"allow-x00": True}})
        schema: Any = schemathesis.openapi.from_wsgi(
            SCHEMA_URL, WSGIHandler(), config=config, headers=dict(world["auth"])
        )
        schema = schema.include(path_regex=r"^/api/", method=METHODS)
        for method, path_regex in EXCLUDED:
            schema = schema.exclude(method=method, path_regex=path_regex)
        results = list(schema.get_all_operations())
        broken = [r.err() for r in results if not isinstance(r, Ok)]
        assert not broken, broken  # an operation schemathesis cannot read
        operations = [r.ok() for r in results]
        assert len(operations) >= MIN_OPERATIONS, sorted(op.label for op in operations)
        explicit = _explicit(world)
        assert set(explicit) <= {op.label for op in operations}

        failures: list[str] = []
        calls = 0
        for operation in operations:
            try:
                calls += _run_operation(
                    operation, world, explicit.get(operation.label, []), errors
                )
            # Every failing operation is reported, not only the first.
            except (Exception, FailureGroup) as exc:
                notes = "\n".join(getattr(exc, "__notes__", []))
                failures.append(f"{operation.label}: {exc}\n{notes}")
    elapsed = time.monotonic() - started
    print(
        f"schemathesis: {len(operations)} operations, {calls} cases in {elapsed:.1f}s"
    )
    assert not sent, f"Celery tasks sent during the run: {sent}"
    assert not failures, "\n\n".join(failures)
    assert calls >= len(operations)

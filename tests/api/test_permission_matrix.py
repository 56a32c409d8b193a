"""Permission matrix generated from the URL conf: every /api/ endpoint and page.

A URL pattern without an entry in EXPECT fails the test: a new endpoint cannot be
forgotten. Mutations get an empty/invalid body: the unauthorized get 401/403 (pages:
a login redirect), the authorized a 400 (pages: their form's redirect) — never 403.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from console.models import ApiKey, Cluster, Operation
from tests.conftest import login

SKIP_PREFIXES = ("static/", "admin/", "i18n/", "jsi18n/", "v1/")
ROLES = ("anon", "viewer", "operator", "admin")
R = 302  # login redirect for pages

# url name -> (method, (anon, viewer, operator, admin))
EXPECT: dict[str, tuple[str, tuple[int, int, int, int]]] = {
    # --- pages (anonymous -> login redirect) ---
    "overview": ("GET", (R, 200, 200, 200)),
    "healthz": ("GET", (200, 200, 200, 200)),
    "login": ("GET", (200, 200, 200, 200)),
    "logout": ("POST", (R, R, R, R)),
    "account-token": ("GET", (R, 200, 200, 200)),
    "cluster-detail": ("GET", (R, 200, 200, 200)),
    # operator form posts: an empty form is refused with a message and a redirect back
    "operation-create": ("POST", (R, 403, R, R)),
    "operation-list": ("GET", (R, 200, 200, 200)),
    "operation-detail": ("GET", (R, 200, 200, 200)),
    "operation-cancel": ("POST", (R, 403, R, R)),
    "apikey-list": ("GET", (R, 403, 200, 200)),
    "apikey-create": ("POST", (R, 403, 400, 400)),
    "apikey-revoke": ("POST", (R, 403, 404, R)),  # an operator: only their own keys
    "apikey-policy": ("POST", (R, 403, 403, 400)),
    "playground": ("GET", (R, 403, 200, 200)),
    "monitoring-index": ("GET", (R, 200, 200, 200)),
    "cluster-dashboard": ("GET", (R, 200, 200, 200)),
    "cluster-series": ("GET", (R, 200, 200, 200)),
    "metrics": ("GET", (403, 403, 403, 403)),  # Prometheus scrape: bearer token only
    "alerts": ("GET", (R, 200, 200, 200)),
    "alert-detail": ("GET", (R, 200, 200, 200)),
    "alert-ack": ("POST", (R, 403, R, R)),
    "alert-silence": ("POST", (R, 403, R, R)),
    "alert-rules": ("GET", (R, 200, 200, 200)),
    "incidents": ("GET", (R, 200, 200, 200)),
    "incident-detail": ("GET", (R, 200, 200, 200)),
    # the fixture incident was skipped: approve/reject are refused with a message
    "incident-decide": ("POST", (R, 403, R, R)),
    "cluster-maintenance": ("POST", (R, 403, R, R)),
    # no node is on RoCE: refused with a message, redirect back
    "cluster-failback": ("POST", (R, 403, R, R)),
    # the node is in service: refused with a message, nothing runs
    "node-readmit": ("POST", (R, 403, R, R)),
    # evidence: findings are on the pages; the tar (logs may quote requests) and collecting need operator
    "evidence-collect": ("POST", (R, 403, R, R)),
    "evidence-download": ("GET", (R, 403, 200, 200)),
    "alert-rule-new": ("GET", (R, 403, 403, 200)),
    # the rule editor's preview fragment: admins only; no metric given -> 400 naming it
    "alert-rule-preview": ("GET", (R, 403, 403, 400)),
    "node-detail": ("GET", (R, 200, 200, 200)),
    "alert-rule-edit": ("GET", (R, 403, 403, 200)),
    # benchmark pages: readable by every role; the fixture has no benchmark run (404)
    "benchmarks": ("GET", (R, 200, 200, 200)),
    "benchmark-run": ("POST", (R, 403, 404, 404)),  # no cluster named
    "benchmark-detail": ("GET", (R, 404, 404, 404)),
    # marking a baseline is an operator's; the run does not exist
    "benchmark-baseline": ("POST", (R, 403, 404, 404)),
    # no sweep or ids / no a and b: 400 naming the field
    "benchmark-sweep": ("GET", (R, 400, 400, 400)),
    "benchmark-compare": ("GET", (R, 400, 400, 400)),
    "benchmark-export-json": ("GET", (R, 200, 200, 200)),
    "benchmark-export-csv": ("GET", (R, 200, 200, 200)),
    # --- REST API (anonymous -> 401, token auth advertises WWW-Authenticate) ---
    "api-schema": ("GET", (200, 200, 200, 200)),
    "api-docs": ("GET", (200, 200, 200, 200)),
    "api-cluster-list": ("GET", (401, 200, 200, 200)),
    "api-cluster-detail": ("GET", (401, 200, 200, 200)),
    "api-node-list": ("GET", (401, 200, 200, 200)),
    "api-node-detail": ("GET", (401, 200, 200, 200)),
    "api-profile-list": ("GET", (401, 200, 200, 200)),
    "api-profile-detail": ("GET", (401, 200, 200, 200)),
    "api-operations": ("GET", (401, 200, 200, 200)),
    "api-operation-detail": ("GET", (401, 200, 200, 200)),
    "api-cluster-operations": ("POST", (401, 403, 400, 400)),
    # the fixture operation has finished: the authorized get 409, not 403
    "api-operation-cancel": ("POST", (401, 403, 409, 409)),
    "api-audit": ("GET", (401, 403, 403, 200)),
    # the fixture cluster is stopped: the gate asks a serving engine, 409 says so
    "api-cluster-gate": ("POST", (401, 403, 409, 409)),
    "api-benchmarks": ("GET", (401, 200, 200, 200)),
    # no benchmark in the fixture: readable by every role, so 404, not 403
    "api-benchmark-detail": ("GET", (401, 404, 404, 404)),
    "api-token-me": ("POST", (401, 201, 201, 201)),
    "api-telemetry-latest": ("GET", (401, 200, 200, 200)),
    # no query parameters: 400 naming node and start
    "api-telemetry-range": ("GET", (401, 400, 400, 400)),
    "api-alerts": ("GET", (401, 200, 200, 200)),
    # operator acknowledges first; admin then finds it already acknowledged (409)
    "api-alert-ack": ("POST", (401, 403, 200, 409)),
    "api-silences": ("POST", (401, 403, 400, 400)),
    "api-alert-rules": ("POST", (401, 403, 403, 400)),
    "api-alert-rule-detail": ("PATCH", (401, 403, 403, 400)),
    "api-apikeys": ("GET", (401, 403, 200, 200)),  # an operator: their own keys
    "api-apikey-revoke": ("POST", (401, 403, 404, 200)),  # only their own
    "api-apikey-policy": ("GET", (401, 403, 200, 200)),
    "api-incidents": ("GET", (401, 200, 200, 200)),
    "api-incidents-stats": ("GET", (401, 200, 200, 200)),
    "api-incident-detail": ("GET", (401, 200, 200, 200)),
    # the fixture incident was skipped, not awaiting approval
    "api-incident-approve": ("POST", (401, 403, 409, 409)),
    "api-incident-reject": ("POST", (401, 403, 409, 409)),
    # no maintenance_mode in the body
    "api-cluster-maintenance": ("POST", (401, 403, 400, 400)),
    # no node on RoCE
    "api-cluster-failback": ("POST", (401, 403, 409, 409)),
    # the node is in service
    "api-node-readmit": ("POST", (401, 403, 409, 409)),
}


# invalid bodies where an empty one would be a valid (partial) update
BODIES = {"api-alert-rule-detail": '{"threshold": "hot"}'}


def _walk(resolver: URLResolver, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for p in resolver.url_patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p, prefix + str(p.pattern))
        else:
            yield prefix + str(p.pattern), p


def _fill(route: str, params: dict[str, Any]) -> str:
    route = route.replace("^", "").replace("$", "")
    route = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: str(params[m.group(1)]), route)
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(params[m.group(1)]), route)


def _routes() -> list[tuple[str, str]]:
    out = []
    for route, pattern in _walk(get_resolver()):
        clean = route.replace("^", "")
        if clean.startswith(SKIP_PREFIXES) or "format" in route:
            continue
        out.append((route, pattern.name or route))
    return out


@pytest.fixture
def world(cluster: Cluster, viewer: Any, operator: Any, admin: Any) -> dict[str, Any]:
    from monitoring.alerts.services import alert_rules_seed
    from monitoring.models import Alert, AlertRule, Incident

    alert_rules_seed()
    rule = AlertRule.objects.order_by("pk").first()
    now = timezone.now()
    alert = Alert.objects.create(
        rule=rule,
        cluster=cluster,
        target="qwen35-prod",
        state="firing",
        severity=rule.severity,
        fault_onset_at=now,
        pending_at=now,
        fired_at=now,
    )
    op = Operation.objects.create(
        cluster=cluster, kind="start", state="succeeded", finished_at=now
    )
    key = ApiKey.objects.create(name="matrix", prefix="mx", digest="x" * 64)
    incident = Incident.objects.create(
        alert=alert,
        cluster=cluster,
        action="failover",
        policy="auto",
        state="skipped",
        fault_onset_at=now,
        detected_at=now,
    )
    from console.models import EvidenceBundle

    bundle = EvidenceBundle.objects.create(
        cluster=cluster, trigger="manual", archive=b"\x1f\x8b", size_bytes=2
    )
    return {
        "cluster": cluster,
        "bundle": bundle,
        "op": op,
        "alert": alert,
        "rule": rule,
        "key": key,
        "incident": incident,
        "users": {"viewer": viewer, "operator": operator, "admin": admin},
    }


def _params(name: str, w: dict[str, Any]) -> dict[str, Any]:
    cluster = w["cluster"]
    pk = w["op"].pk
    if name.startswith(("incident", "api-incident")):
        pk = w["incident"].pk
    elif name.startswith(("alert-rule", "api-alert-rule")):
        pk = w["rule"].pk
    elif name.startswith(("alert", "api-alert")):
        pk = w["alert"].pk
    elif name.startswith(("apikey", "api-apikey")):
        pk = w["key"].pk
    elif name.startswith("evidence"):
        pk = w["bundle"].pk
    elif name == "api-profile-detail":
        pk = cluster.profile.pk
    node_or_cluster = (
        cluster.nodes.order_by("name").first().name
        if name
        in ("api-node-detail", "api-node-readmit", "node-readmit", "node-detail")
        else cluster.name
    )
    return {"name": node_or_cluster, "pk": pk, "cluster_id": cluster.pk}


def _call(client: Client, method: str, url: str, body: str = "{}") -> int:
    if method == "GET":
        return client.get(url).status_code
    send = getattr(client, method.lower())
    return send(url, data=body, content_type="application/json").status_code


def test_every_url_has_the_expected_status_per_role(world: dict[str, Any]) -> None:
    missing, wrong = [], []
    for route, name in _routes():
        if name not in EXPECT:
            missing.append(f"{name} ({route})")
            continue
        method, expected = EXPECT[name]
        url = _fill(route, _params(name, world))
        got = []
        for role in ROLES:
            client = Client() if role == "anon" else login(world["users"][role])
            got.append(_call(client, method, url, BODIES.get(name, "{}")))
        if tuple(got) != expected:
            wrong.append(f"{name}: {method} {url} expected {expected} got {tuple(got)}")
    assert not missing, "add these URL patterns to the matrix (EXPECT): " + ", ".join(
        missing
    )
    assert not wrong, "\n".join(wrong)


# The other methods of the same routes (one URL, several methods): reads and writes each
# checked per role, writes with a body that is invalid so nothing is changed.
EXTRA: list[tuple[str, str, str, tuple[int, int, int, int]]] = [
    ("api-cluster-list", "POST", "{}", (401, 403, 403, 400)),
    ("api-cluster-detail", "PATCH", '{"profile": 999999}', (401, 403, 403, 400)),
    ("api-cluster-detail", "DELETE", "", (401, 403, 403, 409)),  # it has nodes
    ("api-node-list", "POST", "{}", (401, 403, 403, 400)),
    ("api-node-detail", "PATCH", '{"rank": "first"}', (401, 403, 403, 400)),
    ("api-profile-list", "POST", "{}", (401, 403, 403, 400)),
    (
        "api-profile-detail",
        "PATCH",
        '{"tensor_parallel_size": "eight"}',
        (401, 403, 403, 400),
    ),
    ("api-profile-detail", "DELETE", "", (401, 403, 403, 409)),  # a cluster uses it
    ("api-cluster-operations", "GET", "", (401, 200, 200, 200)),
    ("api-cluster-gate", "GET", "", (401, 200, 200, 200)),
    ("api-benchmarks", "POST", "{}", (401, 403, 400, 400)),  # not a --save-result file
    ("api-alert-rules", "GET", "", (401, 200, 200, 200)),
    ("api-alert-rule-detail", "GET", "", (401, 200, 200, 200)),
    ("api-apikeys", "POST", "{}", (401, 403, 400, 400)),
    ("api-apikey-policy", "PUT", "{}", (401, 403, 403, 400)),
    ("api-token-me", "DELETE", "", (401, 404, 404, 404)),  # no token to revoke
]


def test_the_other_methods_of_each_route_per_role(world: dict[str, Any]) -> None:
    routes = {name: route for route, name in _routes()}
    wrong = []
    for name, method, body, expected in EXTRA:
        url = _fill(routes[name], _params(name, world))
        got = []
        for role in ROLES:
            client = Client() if role == "anon" else login(world["users"][role])
            got.append(_call(client, method, url, body))
        if tuple(got) != expected:
            wrong.append(f"{name}: {method} {url} expected {expected} got {tuple(got)}")
    assert not wrong, "\n".join(wrong)
    assert Cluster.objects.filter(pk=world["cluster"].pk).exists()  # nothing deleted


def test_django_admin_redirects_anonymous(db: Any) -> None:
    response = Client().get("/admin/")
    assert response.status_code == 302 and "login/?next=/admin/" in response["Location"]

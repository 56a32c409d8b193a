"""The gateway's third engine-down signal: engine errors it saw become a metric, an alert and a restart."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.conf import settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from console.gateway.upstream_errors import ERRORS_KEY, TOTAL_KEY
from console.models import Cluster, ClusterState
from monitoring.alerts.services import alerts_evaluate
from monitoring.exporter import exposition
from monitoring.models import Alert, Incident

pytestmark = pytest.mark.django_db


@pytest.fixture
def r() -> Any:
    client = redis.Redis.from_url(str(settings.REDIS_URL))
    client.delete(ERRORS_KEY, TOTAL_KEY)
    yield client
    client.delete(ERRORS_KEY, TOTAL_KEY)


def test_engine_errors_seen_by_the_gateway_fire_a_restart_and_resolve_when_they_stop(
    cluster: Cluster, r: Any, django_capture_on_commit_callbacks: Any
) -> None:
    # maintenance mode: the decision is recorded but no operation is queued for a worker
    Cluster.objects.filter(pk=cluster.pk).update(
        state=ClusterState.RUNNING, maintenance_mode=True
    )
    for _ in range(
        4
    ):  # what console.gateway.upstream_errors.upstream_error writes per failed request
        r.hincrby(ERRORS_KEY, str(cluster.pk), 1)
        r.hincrby(TOTAL_KEY, str(cluster.pk), 1)
    with django_capture_on_commit_callbacks(execute=True):
        summary = alerts_evaluate(now=timezone.now())
    alert = Alert.objects.get(rule__name="Gateway sees engine errors")
    assert (
        summary.fired == [alert.pk]
        and alert.target == cluster.name
        and alert.value == 4.0
    )
    assert alert.severity == "critical"
    incident = Incident.objects.get(alert=alert)
    assert incident.action == "restart" and "maintenance mode" in incident.summary
    assert not r.exists(ERRORS_KEY)  # taken by this round: the next round counts afresh
    families = {
        f.name: f for f in text_string_to_metric_families(exposition().decode())
    }
    sample = families["console_gateway_upstream_errors"].samples[0]
    assert sample.name == "console_gateway_upstream_errors_total" and sample.labels == {
        "cluster": cluster.name
    }
    assert sample.value == 4.0  # the Prometheus counter keeps counting
    summary = alerts_evaluate(now=timezone.now())  # a round with no errors
    alert.refresh_from_db()
    assert summary.resolved == [alert.pk] and alert.state == "resolved"


def test_a_couple_of_errors_are_not_an_outage(cluster: Cluster, r: Any) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.RUNNING)
    r.hincrby(ERRORS_KEY, str(cluster.pk), 2)
    alerts_evaluate(now=timezone.now())
    assert not Alert.objects.filter(rule__name="Gateway sees engine errors").exists()

"""Issue 19: a stuck engine (requests running, no token generated) is an alert that restarts it."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from monitoring.alerts.selectors import observations_collect
from monitoring.models import EngineSample
from monitoring.models.alerts import AlertRule

pytestmark = pytest.mark.django_db


def _stalled(cluster: Any, **fields: Any) -> list[float]:
    now = timezone.now()
    EngineSample.objects.create(cluster=cluster, ts=now, engine="all", **fields)
    return [o.value for o in observations_collect(now=now)["engine.stalled"]]


def test_it_flags_requests_running_without_tokens(cluster: Any) -> None:
    assert _stalled(cluster, running=3.0, gen_tps=0.0) == [1.0]


def test_it_does_not_flag_an_idle_or_progressing_engine(cluster: Any) -> None:
    assert _stalled(cluster, running=0.0, gen_tps=0.0) == [0.0]
    EngineSample.objects.all().delete()
    assert _stalled(cluster, running=4.0, gen_tps=57.5) == [0.0]
    EngineSample.objects.all().delete()
    assert (
        _stalled(cluster, running=4.0, gen_tps=None) == []
    )  # first window: no rate yet


def test_the_stalled_rule_restarts_automatically_after_a_tolerance() -> None:
    rule = AlertRule.objects.get(name="Engine stalled")
    assert rule.metric == "engine.stalled" and rule.scope == "cluster"
    assert rule.remediation_action == "restart" and rule.remediation_policy == "auto"
    assert rule.for_s == 30 and rule.severity == "critical"

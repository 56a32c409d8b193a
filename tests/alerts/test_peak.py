"""A resolved alert keeps how bad it got: its peak value, not the last, recovered reading."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from monitoring.alerts.services import alert_to_dict, alerts_evaluate
from monitoring.models.alerts import Alert, AlertRule
from tests.alerts.helpers import ingest

pytestmark = pytest.mark.django_db


def test_it_keeps_the_peak_through_resolution(cluster: Any) -> None:
    node = cluster.nodes.get(name="ascend-01")
    rule = AlertRule.objects.get(name="NPU temperature high")
    t0 = timezone.now()
    for i, temp in enumerate((91.0, 96.5, 93.0, 70.0)):
        ingest(node, t0 + timedelta(seconds=5 * i), temp=temp)
        alerts_evaluate(now=t0 + timedelta(seconds=5 * i))
    alert = Alert.objects.get(rule=rule)
    assert alert.state == "resolved"
    assert alert.value == 70.0
    assert alert.peak_value == 96.5
    assert alert_to_dict(alert)["peak_value"] == 96.5

"""Monitoring's answers to what console announces (connected in MonitoringConfig.ready)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from console.models import Cluster, Node
from console.models.operations import Operation
from console.signals import (
    critical_alerts_asked,
    latest_sample_asked,
    operation_finished,
)
from monitoring import remediation
from monitoring.models import NodeLatest
from monitoring.models.alerts import Alert, AlertState, Severity


def on_operation_finished(sender: Any, *, operation_id: int, **kwargs: Any) -> None:
    """An operation an incident started moves the incident on (verify, next remedy, retry)."""
    remediation.operation_finished(operation_id)


def critical_alerts(
    sender: Any, *, cluster: Cluster, **kwargs: Any
) -> list[tuple[str, str]]:
    """Firing, unsilenced critical alerts of the cluster (the playground refuses to send)."""
    return list(
        Alert.objects.filter(
            cluster=cluster,
            state=AlertState.FIRING,
            severity=Severity.CRITICAL,
            silenced=False,
        ).values_list("target", "rule__name")[:3]
    )


def latest_sample(
    sender: Any, *, node: Node, **kwargs: Any
) -> tuple[datetime, dict[str, Any]] | None:
    """The node's latest sample (failback evidence on the operations page and API)."""
    latest = NodeLatest.objects.filter(node=node).first()
    return None if latest is None else (latest.ts, latest.data or {})


def connect() -> None:
    operation_finished.connect(
        on_operation_finished, sender=Operation, dispatch_uid="monitoring.remediation"
    )
    critical_alerts_asked.connect(
        critical_alerts, sender=Cluster, dispatch_uid="monitoring.critical_alerts"
    )
    latest_sample_asked.connect(
        latest_sample, sender=Node, dispatch_uid="monitoring.latest_sample"
    )

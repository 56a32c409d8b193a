"""Remediation incidents: what the console decided and did about one alert, with its times."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from console.models import Cluster, Node
from console.models.operations import Operation
from monitoring.models.alerts import Alert, RemediationAction, RemediationPolicy


class IncidentState(models.TextChoices):
    AWAITING_APPROVAL = "awaiting_approval", _("Awaiting approval")
    SCHEDULED = "scheduled", _("Scheduled")
    RUNNING = "running", _("Remediating")
    RECOVERED = "recovered", _("Recovered")
    ESCALATED = "escalated", _("Escalated")
    SKIPPED = "skipped", _("Skipped")
    REJECTED = "rejected", _("Rejected")


INCIDENT_OPEN_STATES = (
    IncidentState.AWAITING_APPROVAL,
    IncidentState.SCHEDULED,
    IncidentState.RUNNING,
)
INCIDENT_STATE_COLORS: dict[str, str] = {
    IncidentState.AWAITING_APPROVAL: "orange",
    IncidentState.SCHEDULED: "blue",
    IncidentState.RUNNING: "blue",
    IncidentState.RECOVERED: "green",
    IncidentState.ESCALATED: "red",
    IncidentState.SKIPPED: "grey",
    IncidentState.REJECTED: "grey",
}


class Incident(models.Model):
    """What the console decided and did about one alert whose rule has a remediation policy.

    Times: ``fault_onset_at`` (first bad sample), ``detected_at`` (alert firing),
    ``decided_at``, ``operation_started_at`` (first operation picked up),
    ``healthy_at`` (engine healthy again), ``resolved_at`` (alert resolved).
    ``action`` moves on when a remedy fails (failover → replace). ``operation_ids``
    lists every operation this incident started, in order; ``operation`` is the latest,
    the one whose end moves the incident on (console announces it, monitoring listens).
    """

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="incidents")
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="incidents",
    )
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="incidents"
    )
    action = models.CharField(
        _("action"), max_length=12, choices=RemediationAction.choices
    )
    policy = models.CharField(
        _("policy"), max_length=8, choices=RemediationPolicy.choices
    )
    state = models.CharField(
        _("state"), max_length=20, choices=IncidentState.choices, db_index=True
    )
    summary = models.CharField(_("summary"), max_length=500, blank=True)
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    operation_ids = models.JSONField(default=list, blank=True)
    operation = models.ForeignKey(
        Operation,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="incidents",
        verbose_name=_("latest operation"),
    )
    verification = models.JSONField(default=dict, blank=True)
    fault_onset_at = models.DateTimeField(_("fault onset"))
    detected_at = models.DateTimeField(_("detected"))
    decided_at = models.DateTimeField(_("decided"), null=True, blank=True)
    operation_started_at = models.DateTimeField(
        _("operation started"), null=True, blank=True
    )
    healthy_at = models.DateTimeField(_("healthy again"), null=True, blank=True)
    resolved_at = models.DateTimeField(_("resolved"), null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    approved_at = models.DateTimeField(_("approved"), null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-detected_at", "-pk"]
        indexes = [
            models.Index(
                fields=["cluster", "action", "-created_at"],
                name="incident_cluster_action",
            )
        ]

    def __str__(self) -> str:
        return f"incident #{self.pk} {self.action} {self.alert.target}"

    @property
    def state_color(self) -> str:
        return INCIDENT_STATE_COLORS.get(self.state, "grey")

    @property
    def is_open(self) -> bool:
        return self.state in INCIDENT_OPEN_STATES

    @property
    def detection_s(self) -> float:
        return (self.detected_at - self.fault_onset_at).total_seconds()

    @property
    def decision_s(self) -> float | None:
        if self.operation_started_at is None:
            return None
        return (self.operation_started_at - self.detected_at).total_seconds()

    @property
    def mttr_s(self) -> float | None:
        """Fault onset → recovered: the later of "alert resolved" and "engine healthy again".

        An alert can clear while its remedy is still running (the restart idles the bad
        link); recovery is only over once the engine the incident restarted is healthy.
        """
        ends = [t for t in (self.resolved_at, self.healthy_at) if t is not None]
        if self.operation_ids and self.healthy_at is None:
            return None  # it restarted something that is not healthy (yet)
        return (max(ends) - self.fault_onset_at).total_seconds() if ends else None

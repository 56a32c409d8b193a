"""Alert rules, alerts and their timeline, silences, with the choices they share.

Exported by ``monitoring.models`` (the app's models package), with notification
channels and deliveries (``notifications``) and remediation incidents
(``incidents``). Evaluation lives in ``monitoring.alerts.rules`` (pure) and
``monitoring.alerts.evaluation`` (writes).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from console.models import Cluster, Node


class Severity(models.TextChoices):
    INFO = "info", _("Info")
    WARNING = "warning", _("Warning")
    CRITICAL = "critical", _("Critical")


SEVERITY_RANK: dict[str, int] = {
    Severity.INFO: 0,
    Severity.WARNING: 1,
    Severity.CRITICAL: 2,
}
SEVERITY_COLORS = {
    Severity.INFO: "blue",
    Severity.WARNING: "orange",
    Severity.CRITICAL: "red",
}


class Comparison(models.TextChoices):
    GT = "gt", ">"
    GE = "ge", "≥"
    LT = "lt", "<"
    LE = "le", "≤"
    EQ = "eq", "="
    NE = "ne", "≠"


class Scope(models.TextChoices):
    CHIP = "chip", _("NPU chip")
    NODE = "node", _("Node")
    NIC = "nic", _("RoCE NIC")
    ENGINE = "engine", _("Engine (DP rank)")
    CLUSTER = "cluster", _("Cluster")


class RemediationPolicy(models.TextChoices):
    OFF = "off", _("Off (alert only)")
    ASK = "ask", _("Ask an operator")
    AUTO = "auto", _("Automatic")


class RemediationAction(models.TextChoices):
    NONE = "none", _("None")
    FAILOVER = "failover", _("Fail over to RoCE")
    RESTART = "restart", _("Restart engine")
    SCALE_OUT = "scale_out", _("Scale out to standby")
    REPLACE = "replace", _("Replace node with spare")


class AlertRule(models.Model):
    """``metric <comparison> threshold`` held for ``for_s`` seconds over the latest samples of every target.

    ``metric`` is a key of ``monitoring.alerts.catalog.METRICS`` (it fixes the scope).
    An alert resolves only once the value is past ``resolve_threshold`` (hysteresis;
    None = the threshold itself). ``cluster`` limits the rule to one cluster.
    """

    # What an admin may set (the form, the API and rule_save all take this list);
    # ``scope`` follows from the metric.
    EDITABLE_FIELDS = (
        "name",
        "description",
        "metric",
        "comparison",
        "threshold",
        "resolve_threshold",
        "for_s",
        "severity",
        "labels",
        "cluster",
        "enabled",
        "remediation_policy",
        "remediation_action",
    )

    name = models.CharField(_("name"), max_length=100, unique=True)
    description = models.CharField(_("description"), max_length=300, blank=True)
    metric = models.CharField(_("metric"), max_length=40)
    scope = models.CharField(_("scope"), max_length=10, choices=Scope.choices)
    comparison = models.CharField(
        _("comparison"), max_length=2, choices=Comparison.choices, default=Comparison.GT
    )
    threshold = models.FloatField(_("threshold"))
    resolve_threshold = models.FloatField(_("resolve threshold"), null=True, blank=True)
    for_s = models.PositiveIntegerField(_("for (seconds)"), default=0)
    severity = models.CharField(
        _("severity"), max_length=10, choices=Severity.choices, default=Severity.WARNING
    )
    labels = models.JSONField(_("labels"), default=dict, blank=True)
    cluster = models.ForeignKey(
        Cluster,
        verbose_name=_("cluster"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="alert_rules",
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    remediation_policy = models.CharField(
        _("remediation policy"),
        max_length=8,
        choices=RemediationPolicy.choices,
        default=RemediationPolicy.OFF,
    )
    remediation_action = models.CharField(
        _("remediation action"),
        max_length=12,
        choices=RemediationAction.choices,
        default=RemediationAction.NONE,
    )
    cooldown_s = models.PositiveIntegerField(
        _("cooldown (seconds)"),
        default=600,
        help_text=_(
            "No new automatic action of this rule on the same cluster for this long after one started."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("alert rule")
        verbose_name_plural = _("alert rules")

    def __str__(self) -> str:
        return self.name


class AlertState(models.TextChoices):
    PENDING = "pending", _("Pending")
    FIRING = "firing", _("Firing")
    ACKNOWLEDGED = "acknowledged", _("Acknowledged")
    RESOLVED = "resolved", _("Resolved")


ALERT_STATE_COLORS: dict[str, str] = {
    AlertState.PENDING: "orange",
    AlertState.FIRING: "red",
    AlertState.ACKNOWLEDGED: "purple",
    AlertState.RESOLVED: "green",
}
ACTIVE_STATES = (AlertState.PENDING, AlertState.FIRING, AlertState.ACKNOWLEDGED)


class Alert(models.Model):
    """One rule breached by one target (``target`` e.g. "ascend-03", "ascend-03/npu3.0", "qwen35-prod").

    At most one unresolved alert per rule + target (database constraint). Times:
    ``fault_onset_at`` first bad sample, ``pending_at`` evaluation saw it, ``fired_at``
    after ``for_s``, ``acknowledged_at`` by ``acknowledged_by``, ``resolved_at``.
    """

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="alerts"
    )
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts"
    )
    target = models.CharField(_("target"), max_length=120)
    state = models.CharField(
        _("state"),
        max_length=12,
        choices=AlertState.choices,
        default=AlertState.PENDING,
    )
    severity = models.CharField(_("severity"), max_length=10, choices=Severity.choices)
    value = models.FloatField(_("value"), null=True)
    # The worst value seen while the alert was open (max for >/≥ rules, min for </≤), so a
    # resolved alert shows how bad it got rather than the last, recovered reading.
    peak_value = models.FloatField(_("peak value"), null=True, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    message = models.CharField(_("message"), max_length=300, blank=True)
    silenced = models.BooleanField(_("silenced"), default=False)
    fault_onset_at = models.DateTimeField(_("fault onset"))
    pending_at = models.DateTimeField(_("pending since"))
    fired_at = models.DateTimeField(_("fired"), null=True, blank=True)
    acknowledged_at = models.DateTimeField(_("acknowledged"), null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    resolved_at = models.DateTimeField(_("resolved"), null=True, blank=True)
    last_eval_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-pending_at"]
        constraints = [
            # Dedup: one open alert per rule + target. Used by monitoring.alerts.evaluation.alerts_evaluate
            models.UniqueConstraint(
                fields=["rule", "target"],
                condition=Q(resolved_at=None),
                name="one_open_alert_per_rule_target",
            ),
        ]
        indexes = [
            models.Index(fields=["state", "severity"], name="alert_state_sev")
        ]  # banner + list filters

    def __str__(self) -> str:
        return f"{self.rule.name} @ {self.target}"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES


class AlertEventKind(models.TextChoices):
    PENDING = "pending", _("Pending")
    FIRING = "firing", _("Firing")
    ACKNOWLEDGED = "acknowledged", _("Acknowledged")
    RESOLVED = "resolved", _("Resolved")
    CLEARED = "cleared", _("Cleared before firing")
    SILENCED = "silenced", _("Silenced")
    NOTIFIED = "notified", _("Notification sent")
    NOTIFY_FAILED = "notify_failed", _("Notification failed")
    REMEDIATION = "remediation", _("Remediation")
    NOTE = "note", _("Note")


class AlertEvent(models.Model):
    """One line of an alert's timeline (state changes, notifications, remediation decisions)."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=AlertEventKind.choices)
    at = models.DateTimeField(default=timezone.now)
    message = models.CharField(max_length=500, blank=True)
    data = models.JSONField(default=dict, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["at", "pk"]


class Silence(models.Model):
    """Mutes notifications and remediation of matching alerts until ``ends_at``.

    Matches when every given matcher matches: ``rule`` (None = any), ``target`` (exact;
    empty = any), ``cluster`` (None = any), ``matchers`` (label → value, all must equal).
    """

    rule = models.ForeignKey(
        AlertRule,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="silences",
    )
    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    target = models.CharField(_("target"), max_length=120, blank=True)
    matchers = models.JSONField(_("label matchers"), default=dict, blank=True)
    starts_at = models.DateTimeField(default=timezone.now)
    ends_at = models.DateTimeField(_("ends"))
    comment = models.CharField(_("comment"), max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-ends_at"]

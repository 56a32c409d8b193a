"""Evidence bundles: what every node knew when an operation failed or an engine died."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from console.models.inventory import Cluster
from console.models.operations import Operation


class EvidenceTrigger(models.TextChoices):
    OPERATION_FAILED = "operation_failed", _("Operation failed")
    ENGINE_EXITED = "engine_exited", _("Engine exited")
    REMEDY = "remedy", _("Before a remedy")
    MANUAL = "manual", _("On demand")


class EvidenceBundle(models.Model):
    """One collection round across a cluster's nodes, stored as a size-bounded tar.gz.

    ``nodes`` lists per node whether its agent answered and which files it sent;
    ``findings`` is engine.findings' cross-node diagnosis (earliest error first,
    ``first`` marks it). ``incident_id`` names a monitoring Incident without a foreign
    key (imports go monitoring → console, never back).
    """

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="evidence_bundles"
    )
    operation = models.ForeignKey(
        Operation,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="evidence_bundles",
    )
    incident_id = models.PositiveIntegerField(
        _("incident"), null=True, blank=True, db_index=True
    )
    trigger = models.CharField(
        _("trigger"), max_length=20, choices=EvidenceTrigger.choices
    )
    reason = models.CharField(_("reason"), max_length=300, blank=True)
    created_at = models.DateTimeField(
        _("collected"), default=timezone.now, db_index=True
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    nodes = models.JSONField(default=list, blank=True)
    findings = models.JSONField(default=list, blank=True)
    archive = models.BinaryField(editable=False)
    size_bytes = models.PositiveIntegerField(_("size"), default=0)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"evidence #{self.pk} of {self.cluster.name} ({self.trigger})"

    @property
    def first_finding(self) -> dict[str, Any] | None:
        return next((f for f in self.findings if f.get("first")), None)

    @property
    def filename(self) -> str:
        stamp = self.created_at.strftime("%Y%m%d-%H%M%S")
        return f"evidence-{self.cluster.name}-{self.pk}-{stamp}.tar.gz"

"""Operations on a cluster (preflight, start, stop, restart, failover, scale-out) and their steps."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from console.models.inventory import Cluster, Node


class OperationKind(models.TextChoices):
    PREFLIGHT = "preflight", _("Preflight")
    START = "start", _("Start")
    STOP = "stop", _("Stop")
    RESTART = "restart", _("Restart")
    FAILOVER = "failover", _("Failover")
    SCALE_OUT = "scale_out", _("Scale out")
    REPLACE = "replace", _("Replace node")
    VERIFY_WEIGHTS = "verify_weights", _("Verify weights (sha256)")
    BENCHMARK = "benchmark", _("Benchmark")


# Kinds that only read: they run in any cluster state and leave it as it was.
READ_ONLY_KINDS = (
    OperationKind.PREFLIGHT,
    OperationKind.VERIFY_WEIGHTS,
    OperationKind.BENCHMARK,
)


class OperationState(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    CANCELLED = "cancelled", _("Cancelled")
    INTERRUPTED = "interrupted", _("Interrupted")


ACTIVE_STATES = (OperationState.QUEUED, OperationState.RUNNING)
OPERATION_STATE_COLORS: dict[str, str] = {
    OperationState.QUEUED: "grey",
    OperationState.RUNNING: "blue",
    OperationState.SUCCEEDED: "green",
    OperationState.FAILED: "red",
    OperationState.CANCELLED: "grey",
    OperationState.INTERRUPTED: "orange",
}


class StepState(models.TextChoices):
    PENDING = "pending", _("Pending")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    WARNING = "warning", _("Warning")
    FAILED = "failed", _("Failed")
    SKIPPED = "skipped", _("Skipped")
    ROLLED_BACK = "rolled_back", _("Rolled back")


STEP_STATE_COLORS: dict[str, str] = {
    StepState.PENDING: "grey",
    StepState.RUNNING: "blue",
    StepState.SUCCEEDED: "green",
    StepState.WARNING: "orange",
    StepState.FAILED: "red",
    StepState.SKIPPED: "grey",
    StepState.ROLLED_BACK: "orange",
}


class Operation(models.Model):
    """One run of a runbook against a cluster; at most one active per cluster (database-enforced)."""

    cluster = models.ForeignKey(
        Cluster,
        verbose_name=_("cluster"),
        on_delete=models.CASCADE,
        related_name="operations",
    )
    kind = models.CharField(_("kind"), max_length=16, choices=OperationKind.choices)
    state = models.CharField(
        _("state"),
        max_length=16,
        choices=OperationState.choices,
        default=OperationState.QUEUED,
        db_index=True,
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    requested_by_name = models.CharField(
        _("requested by"), max_length=150, default="system"
    )
    source = models.CharField(
        _("source"),
        max_length=16,
        default="ui",
        help_text=_("ui, api, cli or automation"),
    )
    reason = models.CharField(_("reason"), max_length=500, blank=True)
    force = models.BooleanField(_("forced past preflight"), default=False)
    params = models.JSONField(_("parameters"), default=dict, blank=True)
    result = models.JSONField(_("result"), default=dict, blank=True)
    error = models.TextField(_("error"), blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now, db_index=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    # Refreshed by the control worker while it runs the operation; a stale heartbeat
    # means the worker died and the operation is marked interrupted.
    heartbeat_at = models.DateTimeField(_("heartbeat"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("operation")
        verbose_name_plural = _("operations")
        constraints = [
            models.UniqueConstraint(
                fields=["cluster"],
                condition=Q(finished_at__isnull=True),
                name="one_active_operation_per_cluster",
            ),
        ]
        indexes = [
            models.Index(fields=["cluster", "-created_at"], name="op_cluster_recent")
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_kind_display()} {self.cluster.name}"

    @property
    def is_active(self) -> bool:
        return self.finished_at is None

    @property
    def state_color(self) -> str:
        return OPERATION_STATE_COLORS.get(self.state, "grey")

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.finished_at or timezone.now()
        return (end - self.started_at).total_seconds()

    def progress(self) -> tuple[int, int]:
        """(finished steps, all steps) for the progress bar."""
        steps = list(self.steps.all())
        done = sum(
            1 for s in steps if s.state not in (StepState.PENDING, StepState.RUNNING)
        )
        return done, len(steps)


class OperationStep(models.Model):
    """One step of an operation, scoped to the cluster or to one node."""

    operation = models.ForeignKey(
        Operation, on_delete=models.CASCADE, related_name="steps"
    )
    seq = models.PositiveIntegerField(_("sequence"))
    name = models.CharField(_("name"), max_length=120)
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state = models.CharField(
        _("state"), max_length=16, choices=StepState.choices, default=StepState.PENDING
    )
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    summary = models.CharField(_("summary"), max_length=500, blank=True)
    log_tail = models.TextField(_("log tail"), blank=True)
    diagnosis = models.JSONField(_("diagnosis"), default=list, blank=True)
    data = models.JSONField(_("data"), default=dict, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["operation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["operation", "seq"], name="unique_step_seq")
        ]

    def __str__(self) -> str:
        return f"{self.seq}. {self.name}"

    @property
    def state_color(self) -> str:
        return STEP_STATE_COLORS.get(self.state, "grey")

    @property
    def elapsed_s(self) -> float | None:
        if self.started_at is None:
            return None
        return ((self.finished_at or timezone.now()) - self.started_at).total_seconds()

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.pk,
            "seq": self.seq,
            "name": self.name,
            "node": self.node.name if self.node is not None else None,
            "state": self.state,
            "state_label": str(self.get_state_display()),
            "color": self.state_color,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "elapsed_s": self.elapsed_s,
            "summary": self.summary,
            "log_tail": self.log_tail,
            "diagnosis": self.diagnosis,
            "data": self.data,
            "progress": [self.progress_done, self.progress_total],
        }

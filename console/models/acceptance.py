"""Acceptance runs: correctness-gate results and benchmark results, kept as history."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from console.models.inventory import Cluster


class GatePolicy(models.TextChoices):
    ENFORCE = "enforce", _("Enforce")
    WARN = "warn", _("Warn")
    OFF = "off", _("Off")


class GateRun(models.Model):
    """One correctness-gate run on a cluster: its samples, accuracy and verdict.

    ``samples`` holds each sample's prompt, answer, finish reason, correctness and
    sanity problems (engine.gate.SampleResult.to_dict), so a failed gate names them.
    """

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="gate_runs"
    )
    trigger = models.CharField(_("trigger"), max_length=16, default="manual")
    policy = models.CharField(max_length=8, choices=GatePolicy.choices)
    passed = models.BooleanField(_("passed"))
    accuracy = models.FloatField(_("accuracy"))
    baseline = models.FloatField()
    threshold = models.FloatField()
    reason = models.CharField(_("reason"), max_length=300)
    samples = models.JSONField(default=list)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(default=timezone.now)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )

    class Meta:
        ordering = ["-started_at", "-pk"]

    def __str__(self) -> str:
        return f"gate {self.cluster_id} {'pass' if self.passed else 'FAIL'}"


class BenchmarkRun(models.Model):
    """One benchmark result (one concurrency/rate point), with ``vllm bench serve --save-result``'s names.

    The headline figures are columns; every ``{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms``
    figure is in ``latency_ms`` under its vLLM key; ``raw`` keeps the imported JSON minus
    the per-request arrays. ``plan_digest`` and ``engine_versions`` make two runs comparable.
    """

    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="benchmark_runs",
    )
    label = models.CharField(_("label"), max_length=120, blank=True)
    sweep = models.CharField(_("sweep"), max_length=40, blank=True, db_index=True)
    source = models.CharField(_("source"), max_length=16, default="import")
    target = models.CharField(
        _("sent to"), max_length=16, default="head", help_text=_("head or gateway")
    )
    tool = models.CharField(_("tool"), max_length=40)
    tool_version = models.CharField(_("tool version"), max_length=40, blank=True)
    date = models.DateTimeField(_("date"), default=timezone.now)
    model_id = models.CharField(max_length=200, blank=True)
    num_prompts = models.PositiveIntegerField(null=True, blank=True)
    request_rate = models.FloatField(null=True, blank=True)  # None = inf
    burstiness = models.FloatField(null=True, blank=True)
    max_concurrency = models.PositiveIntegerField(null=True, blank=True)
    input_len = models.PositiveIntegerField(null=True, blank=True)
    output_len = models.PositiveIntegerField(null=True, blank=True)
    npu_count = models.PositiveIntegerField(_("NPUs"), null=True, blank=True)
    plan_digest = models.CharField(_("plan digest"), max_length=64, blank=True)
    engine_versions = models.JSONField(default=dict, blank=True)
    # vllm/benchmarks/serve.py result names
    duration = models.FloatField()
    completed = models.PositiveIntegerField()
    failed = models.PositiveIntegerField(default=0)
    total_input_tokens = models.PositiveBigIntegerField()
    total_output_tokens = models.PositiveBigIntegerField()
    request_throughput = models.FloatField()
    request_goodput = models.FloatField(null=True, blank=True)
    output_throughput = models.FloatField()
    total_token_throughput = models.FloatField()
    max_output_tokens_per_s = models.FloatField(null=True, blank=True)
    max_concurrent_requests = models.FloatField(null=True, blank=True)
    latency_ms = models.JSONField(default=dict)
    raw = models.JSONField(default=dict, blank=True)
    is_baseline = models.BooleanField(_("baseline"), default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )

    class Meta:
        ordering = ["-date", "-pk"]

    @property
    def output_tps_per_npu(self) -> float | None:
        """Output tokens/s per NPU (the field guide's acceptance unit); None without an NPU count."""
        if not self.npu_count:
            return None
        return self.output_throughput / self.npu_count

    def __str__(self) -> str:
        return f"bench #{self.pk} {self.label or self.tool}"

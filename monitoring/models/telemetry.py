"""Telemetry storage: raw samples (24 h), 1-minute rollups (30 days), the latest sample per node, errors.

Raw rows are narrow and indexed on (owner, time) for chart windows; the newest full
sample of every node lives in ``NodeLatest`` so the exporter, the heatmap and the
HCCS loss delta never scan the time series.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from console.models import Cluster, Node


class CollectRound(models.Model):
    """One poll of every node (one beat tick): what came back and how long ingest took."""

    started_at = models.DateTimeField(
        _("started"), db_index=True
    )  # Used by exporter + lag
    finished_at = models.DateTimeField(_("finished"))
    nodes_total = models.PositiveIntegerField(default=0)
    nodes_ok = models.PositiveIntegerField(default=0)
    rows = models.PositiveIntegerField(default=0)
    ingest_ms = models.FloatField(default=0.0)

    class Meta:
        ordering = ["-started_at"]


class NodeSample(models.Model):
    """Host figures of one node at one time, with the node's worst HCCS loss and RoCE summary."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    ts = models.DateTimeField(_("collected at"))
    cpu_pct = models.FloatField(null=True)
    mem_used_pct = models.FloatField(null=True)
    load1 = models.FloatField(null=True)
    disk_free_gb = models.FloatField(null=True)
    engine_rss_mb = models.FloatField(null=True)
    engine_state = models.CharField(max_length=16, blank=True)
    hccs_loss_pct = models.FloatField(
        null=True
    )  # worst link of the node over the last window
    roce_down = models.PositiveSmallIntegerField(default=0)  # ports whose link is DOWN
    errors = models.PositiveSmallIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(
                fields=["node", "ts"], name="nodesample_node_ts"
            ),  # chart windows
            models.Index(fields=["ts"], name="nodesample_ts"),  # Used by prune
        ]


class ChipSample(models.Model):
    """One NPU chip at one time (npu-smi info), plus its HCCS loss over the last window."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    ts = models.DateTimeField(_("collected at"))
    npu = models.PositiveSmallIntegerField()
    chip = models.PositiveSmallIntegerField()
    health = models.CharField(max_length=16, blank=True)
    temp_c = models.FloatField(null=True)
    power_w = models.FloatField(null=True)
    aicore_pct = models.FloatField(null=True)
    hbm_used_mb = models.FloatField(null=True)
    hbm_total_mb = models.FloatField(null=True)
    hccs_loss_pct = models.FloatField(null=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["node", "ts"], name="chipsample_node_ts"
            ),  # chart windows
            models.Index(fields=["ts"], name="chipsample_ts"),  # Used by prune
        ]

    @property
    def hbm_pct(self) -> float | None:
        if self.hbm_used_mb is None or not self.hbm_total_mb:
            return None
        return 100.0 * self.hbm_used_mb / self.hbm_total_mb


class EngineSample(models.Model):
    """Serving figures of one engine (DP rank) or the whole cluster (engine == "all") over one window."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    ts = models.DateTimeField(_("scraped at"))
    engine = models.CharField(max_length=16)
    running = models.FloatField(default=0.0)
    waiting = models.FloatField(default=0.0)
    kv_cache_pct = models.FloatField(null=True)
    ttft_p50 = models.FloatField(null=True)
    ttft_p95 = models.FloatField(null=True)
    ttft_p99 = models.FloatField(null=True)
    itl_p50 = models.FloatField(null=True)
    itl_p95 = models.FloatField(null=True)
    itl_p99 = models.FloatField(null=True)
    e2e_p50 = models.FloatField(null=True)
    e2e_p95 = models.FloatField(null=True)
    e2e_p99 = models.FloatField(null=True)
    prompt_tps = models.FloatField(null=True)
    gen_tps = models.FloatField(null=True)
    requests_ps = models.FloatField(null=True)
    prefix_hit_pct = models.FloatField(null=True)
    preemptions = models.FloatField(null=True)
    success = models.JSONField(default=dict)  # finished_reason → requests in the window

    class Meta:
        indexes = [
            models.Index(
                fields=["cluster", "engine", "ts"], name="enginesample_cl_eng_ts"
            ),  # chart windows
            models.Index(fields=["ts"], name="enginesample_ts"),  # Used by prune
        ]


class ScrapeState(models.Model):
    """The previous /metrics scrape of a cluster's API server (cumulative values), for the next window."""

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    url = models.CharField(max_length=300)
    scraped_at = models.DateTimeField()
    engines = models.JSONField(default=dict)  # engine label → EngineSnapshot.to_dict()
    health_ok = models.BooleanField(default=True)  # /health answered 200 on that scrape


class NodeLatest(models.Model):
    """The newest full sample of a node (chips, HCCS counters, RoCE ports, host, engine)."""

    node = models.OneToOneField(
        Node, on_delete=models.CASCADE, primary_key=True, related_name="telemetry"
    )
    ts = models.DateTimeField()
    data = models.JSONField(default=dict)


class SampleError(models.Model):
    """A sample (or part of one) that could not be collected or parsed; the raw text is kept for diagnosis."""

    ts = models.DateTimeField(db_index=True)
    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    source = models.CharField(max_length=200)
    message = models.TextField()
    raw = models.TextField(blank=True)

    class Meta:
        ordering = ["-ts"]

    def __str__(self) -> str:
        return f"{self.source}: {self.message[:80]}"


class Rollup(models.Model):
    """One minute of one series, downsampled from raw samples (kept 30 days).

    ``series`` names a figure ("chip.temp_c", "engine.ttft_p99", "node.hccs_loss_pct");
    ``key`` says whose ("3.0" for NPU 3 chip 0, "all" for the cluster engine).
    """

    cluster = models.ForeignKey(
        Cluster, null=True, on_delete=models.CASCADE, related_name="+"
    )
    node = models.ForeignKey(
        Node, null=True, on_delete=models.CASCADE, related_name="+"
    )
    series = models.CharField(max_length=40)
    key = models.CharField(max_length=32)
    minute = models.DateTimeField()
    avg = models.FloatField()
    max = models.FloatField()
    n = models.PositiveIntegerField()

    class Meta:
        indexes = [
            models.Index(
                fields=["cluster", "series", "minute"], name="rollup_cluster_series_min"
            ),
            models.Index(
                fields=["node", "series", "minute"], name="rollup_node_series_min"
            ),
            models.Index(fields=["minute"], name="rollup_minute"),  # Used by prune
        ]

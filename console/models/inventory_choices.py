"""The inventory's vocabulary: node and cluster names, server models, link modes, and the
states and roles of clusters and nodes with the colors the pages show them in.

Separate from the Cluster and Node models (console/models/inventory.py, which
re-exports these names) because pages, monitoring and forms use the vocabulary
without the models' rules.
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from engine import links
from engine.capabilities import SERVER_MODEL_LABELS

name_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
    _("Use lowercase letters, digits and hyphens (e.g. ascend-01)."),
)


# Server models of engine/capabilities/servers.py (key, label); detected and override share them.
SERVER_MODEL_CHOICES = list(SERVER_MODEL_LABELS.items())


class LinkMode(models.TextChoices):
    """engine.links.LinkMode with labels for forms and pages (the values are engine's)."""

    HCCS = links.LinkMode.HCCS.value, _("HCCS")
    ROCE = links.LinkMode.ROCE.value, _("RoCE")


class ClusterState(models.TextChoices):
    STOPPED = "stopped", _("Stopped")
    STARTING = "starting", _("Starting")
    RUNNING = "running", _("Running")
    DEGRADED = "degraded", _("Degraded")
    DRAINING = "draining", _("Draining")
    STOPPING = "stopping", _("Stopping")
    FAILED = "failed", _("Failed")


CLUSTER_STATE_COLORS: dict[str, str] = {
    ClusterState.STOPPED: "grey",
    ClusterState.STARTING: "blue",
    ClusterState.RUNNING: "green",
    ClusterState.DEGRADED: "orange",
    ClusterState.DRAINING: "blue",
    ClusterState.STOPPING: "blue",
    ClusterState.FAILED: "red",
}


class NodeRole(models.TextChoices):
    HEAD = "head", _("Head (rank 0, API server)")
    WORKER = "worker", _("Worker (headless rank)")
    SPARE = "spare", _("Spare (idle, in no cluster)")


class NodeState(models.TextChoices):
    UNKNOWN = "unknown", _("Unknown")
    READY = "ready", _("Ready")
    RUNNING = "running", _("Running")
    STALE = "stale", _("Stale")
    UNREACHABLE = "unreachable", _("Unreachable")
    OUT_OF_SERVICE = "out_of_service", _("Out of service")


NODE_STATE_COLORS: dict[str, str] = {
    NodeState.UNKNOWN: "grey",
    NodeState.READY: "blue",
    NodeState.RUNNING: "green",
    NodeState.STALE: "orange",
    NodeState.UNREACHABLE: "red",
    NodeState.OUT_OF_SERVICE: "red",
}

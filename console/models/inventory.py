"""Inventory: clusters and the Ascend nodes they run on, with their states, roles and colors.

The engine profile a cluster serves is in console/models/profiles.py; the states,
roles, link modes and colors are in console/models/inventory_choices.py (re-exported
here).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from console.models.inventory_choices import (
    CLUSTER_STATE_COLORS,
    NODE_STATE_COLORS,
    SERVER_MODEL_CHOICES,
    ClusterState,
    LinkMode,
    NodeRole,
    NodeState,
    name_validator,
)
from console.models.profiles import EngineProfile
from engine.capabilities import UNKNOWN_MODEL, capability

# The vocabulary is re-exported: callers import it from here (console.models, gateway,
# monitoring) as they did before it moved to inventory_choices.
__all__ = [
    "CLUSTER_STATE_COLORS",
    "NODE_STATE_COLORS",
    "SERVER_MODEL_CHOICES",
    "Cluster",
    "ClusterState",
    "LinkMode",
    "Node",
    "NodeRole",
    "NodeState",
    "name_validator",
]


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


class Cluster(models.Model):
    """A group of Ascend nodes serving one engine profile together (one vLLM deployment)."""

    name = models.CharField(
        _("name"), max_length=63, unique=True, validators=[name_validator]
    )
    description = models.CharField(_("description"), max_length=200, blank=True)
    profile = models.ForeignKey(
        EngineProfile,
        verbose_name=_("engine profile"),
        on_delete=models.PROTECT,
        related_name="clusters",
    )
    state = models.CharField(
        _("state"),
        max_length=16,
        choices=ClusterState.choices,
        default=ClusterState.STOPPED,
    )
    state_changed_at = models.DateTimeField(_("state changed"), default=timezone.now)
    maintenance_mode = models.BooleanField(
        _("maintenance mode"),
        default=False,
        help_text=_("Pauses all automatic remediation."),
    )
    gate_policy = models.CharField(
        _("correctness gate"),
        max_length=8,
        choices=[("enforce", _("Enforce")), ("warn", _("Warn")), ("off", _("Off"))],
        default="enforce",
        help_text=_(
            "After start, restart, failover and replace: enforce keeps a failing cluster out of serving."
        ),
    )
    gate_blocked = models.BooleanField(
        _("held out of the gateway pool"),
        default=False,
        help_text=_(
            "Set when a correctness gate fails under policy enforce on a serving cluster "
            "(an on-demand run); the next passing gate clears it."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("cluster")
        verbose_name_plural = _("clusters")

    def __str__(self) -> str:
        return self.name

    @property
    def state_color(self) -> str:
        return CLUSTER_STATE_COLORS.get(self.state, "grey")

    def ranked_nodes(self) -> list[Node]:
        """Return member nodes in rank order (start order; stop is the reverse)."""
        return list(self.nodes.exclude(role=NodeRole.SPARE).order_by("rank"))

    def head(self) -> Node | None:
        return self.nodes.filter(role=NodeRole.HEAD).first()

    def membership_errors(self) -> list[str]:
        """Whole-cluster rules a single Node.clean cannot see: one head at rank 0, ranks 0..n-1."""
        problems: list[str] = []
        nodes = self.ranked_nodes()
        heads = [n for n in nodes if n.role == NodeRole.HEAD]
        if len(heads) != 1:
            problems.append(
                str(
                    _(
                        "Cluster {c} has {n} head nodes; it needs exactly one (rank 0)."
                    ).format(c=self.name, n=len(heads))
                )
            )
        ranks = [n.rank for n in nodes]
        if ranks != list(range(len(nodes))):
            problems.append(
                str(
                    _("Ranks of {c} are {r}; they must be 0..{m} without gaps.").format(
                        c=self.name, r=ranks, m=len(nodes) - 1
                    )
                )
            )
        return problems


class Node(models.Model):
    """One Ascend server (e.g. Atlas 800T A2 with 8 x 910B) and the node agent that runs on it."""

    class Driver(models.TextChoices):
        SYSTEMD = "systemd", _("systemd")
        PROCESS = "process", _("process")
        SIM = "sim", _("simulator")
        CONTAINER = "container", _("container (vllm-ascend image)")

    name = models.CharField(
        _("name"), max_length=63, unique=True, validators=[name_validator]
    )
    hostname = models.CharField(_("hostname"), max_length=253)
    management_ip = models.GenericIPAddressField(_("management IP"))
    nic_name = models.CharField(
        _("NIC name"),
        max_length=32,
        default="enp189s0f0",
        help_text=_("Host NIC for HCCL/Gloo/TP sockets."),
    )
    npu_ips = models.JSONField(
        _("NPU NIC IPs"),
        default=list,
        blank=True,
        help_text=_("RoCE IPs of the NPUs, in NPU order (hccn_tool -i N -ip -g)."),
    )
    cluster = models.ForeignKey(
        Cluster,
        verbose_name=_("cluster"),
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="nodes",
    )
    rank = models.PositiveSmallIntegerField(_("rank"), null=True, blank=True)
    role = models.CharField(
        _("role"), max_length=8, choices=NodeRole.choices, default=NodeRole.WORKER
    )
    server_model = models.CharField(
        _("server model"), max_length=64, default="Atlas 800T A2"
    )
    npu_model = models.CharField(_("NPU model"), max_length=32, default="Ascend 910B3")
    npu_count = models.PositiveSmallIntegerField(
        _("NPU count"),
        default=8,
        validators=[MinValueValidator(1), MaxValueValidator(64)],
    )
    hbm_per_npu_gb = models.PositiveSmallIntegerField(
        _("HBM per NPU (GB)"), default=64, validators=[MinValueValidator(1)]
    )
    api_port = models.PositiveIntegerField(
        _("API port"),
        default=8000,
        validators=[MinValueValidator(1), MaxValueValidator(65535)],
    )
    rpc_port = models.PositiveIntegerField(
        _("RPC / master port"),
        default=13389,
        validators=[MinValueValidator(1), MaxValueValidator(65535)],
        help_text=_(
            "--data-parallel-rpc-port (or --master-port) when this node is the head."
        ),
    )
    agent_queue = models.CharField(
        _("agent queue"),
        max_length=80,
        blank=True,
        help_text=_("Defaults to node.<name>."),
    )
    driver = models.CharField(
        _("engine driver"),
        max_length=16,
        choices=Driver.choices,
        default=Driver.SYSTEMD,
    )
    link_mode = models.CharField(
        _("intra-server link"),
        max_length=8,
        choices=LinkMode.choices,
        default=LinkMode.HCCS,
    )
    link_mode_since = models.DateTimeField(_("link mode since"), null=True, blank=True)
    link_mode_reason = models.CharField(
        _("link mode reason"), max_length=300, blank=True
    )
    # The HCCS links (npu, chip, link) that lost packets when the node was replaced,
    # measured under traffic before its engine stopped; re-admission checks exactly
    # these (engine.link_verify.verify_links_recovered). Empty: none recorded.
    failed_links = models.JSONField(_("failed HCCS links"), default=list, blank=True)
    failed_links_evidence = models.JSONField(default=dict, blank=True)
    # What preflight read (engine/parsers/server_model.py) and a site's correction of
    # it; the effective model picks the remedy for a link fault (engine/capabilities/servers.py).
    detected_server_model = models.CharField(
        _("detected server model"),
        max_length=32,
        choices=SERVER_MODEL_CHOICES,
        blank=True,
        help_text=_("Read at preflight from the SMBIOS product name and npu-smi."),
    )
    detected_server_model_evidence = models.CharField(
        _("server model evidence"), max_length=500, blank=True
    )
    detected_server_model_at = models.DateTimeField(
        _("server model detected at"), null=True, blank=True
    )
    server_model_override = models.CharField(
        _("server model override"),
        max_length=32,
        choices=SERVER_MODEL_CHOICES,
        blank=True,
    )
    server_model_override_reason = models.CharField(
        _("server model override reason"), max_length=300, blank=True
    )
    state = models.CharField(
        _("state"), max_length=16, choices=NodeState.choices, default=NodeState.UNKNOWN
    )
    last_seen_at = models.DateTimeField(_("last seen"), null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster__name", "rank", "name"]
        verbose_name = _("node")
        verbose_name_plural = _("nodes")
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "rank"], name="unique_rank_per_cluster"
            ),
            # One head per cluster, enforced by the database as well as by clean().
            models.UniqueConstraint(
                fields=["cluster"],
                condition=Q(role="head"),
                name="one_head_per_cluster",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.agent_queue:
            self.agent_queue = f"node.{self.name}"
        super().save(*args, **kwargs)

    @property
    def state_color(self) -> str:
        return NODE_STATE_COLORS.get(self.state, "grey")

    @property
    def effective_server_model(self) -> str:
        """The capability key the remedies use: the site override, else the detected
        model, else ``unknown``."""
        return self.server_model_override or self.detected_server_model or UNKNOWN_MODEL

    @property
    def server_model_source(self) -> str:
        """``override`` | ``detected`` | ``none``."""
        if self.server_model_override:
            return "override"
        return "detected" if self.detected_server_model else "none"

    @property
    def effective_server_model_label(self) -> str:
        return capability(self.effective_server_model).label

    @property
    def is_schedulable(self) -> bool:
        return self.state not in (NodeState.OUT_OF_SERVICE, NodeState.UNREACHABLE)

    def clean(self) -> None:
        """Raises ValidationError keyed by field: the role's cluster and rank, a rank or
        head another node holds, the NPU IPs, the ports and an override's reason."""
        errors: dict[str, Any] = {}
        # In this order: a later step's key replaces an earlier one's (a taken rank
        # wins over a rank the role forbids).
        for step in (
            self._role_errors,
            self._taken_errors,
            self._npu_ips_errors,
            self._port_errors,
            self._override_errors,
        ):
            errors.update(step())
        if errors:
            raise ValidationError(errors)

    def _role_errors(self) -> dict[str, Any]:
        """A spare has no cluster and no rank; a member needs both, rank 0 for the head only."""
        errors: dict[str, Any] = {}
        if self.role == NodeRole.SPARE:
            if self.cluster_id is not None:
                errors["cluster"] = _(
                    "A spare belongs to no cluster; clear the cluster or change the role."
                )
            if self.rank is not None:
                errors["rank"] = _("A spare has no rank; clear it.")
        else:
            if self.cluster_id is None:
                errors["cluster"] = _(
                    "A {role} node needs a cluster; pick one or make it a spare."
                ).format(role=self.get_role_display())
            if self.rank is None:
                errors["rank"] = _("A cluster member needs a rank (0 for the head).")
            elif self.role == NodeRole.HEAD and self.rank != 0:
                errors["rank"] = _(
                    "The head runs rank 0 (the API server); set rank 0 or make this node a worker."
                )
            elif self.role == NodeRole.WORKER and self.rank == 0:
                errors["rank"] = _(
                    "Rank 0 is the head; give this worker rank 1 or higher."
                )
        return errors

    def _taken_errors(self) -> dict[str, Any]:
        """The rank, or the head role, already held by another node of the cluster."""
        errors: dict[str, Any] = {}
        if self.cluster_id is not None and self.rank is not None:
            clash = (
                Node.objects.filter(cluster_id=self.cluster_id, rank=self.rank)
                .exclude(pk=self.pk)
                .first()
            )
            if clash:
                errors["rank"] = _(
                    "Rank {rank} is already taken by {node} in this cluster; pick a free rank."
                ).format(rank=self.rank, node=clash.name)
        if self.cluster_id is not None and self.role == NodeRole.HEAD:
            other = (
                Node.objects.filter(cluster_id=self.cluster_id, role=NodeRole.HEAD)
                .exclude(pk=self.pk)
                .first()
            )
            if other:
                errors["role"] = _(
                    "{node} is already the head of this cluster; a cluster has exactly one head."
                ).format(node=other.name)
        return errors

    def _npu_ips_errors(self) -> dict[str, Any]:
        """A JSON list of IP addresses, one per NPU (or empty)."""
        errors: dict[str, Any] = {}
        if not isinstance(self.npu_ips, list) or not all(
            isinstance(ip, str) for ip in self.npu_ips
        ):
            errors["npu_ips"] = _(
                'NPU IPs must be a JSON list of addresses, e.g. ["10.0.0.1", "10.0.0.2"].'
            )
        elif bad_ips := [ip for ip in self.npu_ips if not _is_ip(ip)]:
            errors["npu_ips"] = _(
                "{ips} are not IP addresses; list one IP per NPU."
            ).format(ips=", ".join(bad_ips))
        elif self.npu_ips and len(self.npu_ips) != self.npu_count:
            errors["npu_ips"] = _(
                "{n} NPU IPs for {c} NPUs; list one IP per NPU."
            ).format(n=len(self.npu_ips), c=self.npu_count)
        return errors

    def _port_errors(self) -> dict[str, Any]:
        """The RPC port differs from the API port."""
        errors: dict[str, Any] = {}
        if self.api_port == self.rpc_port:
            errors["rpc_port"] = _(
                "The RPC port must differ from the API port ({port})."
            ).format(port=self.api_port)
        return errors

    def _override_errors(self) -> dict[str, Any]:
        """A server model override comes with its reason."""
        errors: dict[str, Any] = {}
        if self.server_model_override and not self.server_model_override_reason.strip():
            errors["server_model_override_reason"] = _(
                "Say why the detected server model is overridden (e.g. the SMBIOS "
                "product name is blank on this server)."
            )
        return errors

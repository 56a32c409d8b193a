"""Admin writes to the inventory (clusters, nodes, engine profiles) for the REST API.

Every write runs the model's full_clean() and, for profiles and clusters, the
launch-plan validation of engine/ (flags known to the target vLLM version, fit in
HBM); it is atomic and leaves one audit row with before/after.
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils.translation import gettext as _

from console.models import Cluster, EngineProfile, LinkMode, Node
from console.services.audit import audit_record, snapshot
from console.services.plans import cluster_plan, profile_spec
from engine import compat
from engine.plans import NodeSpec, PlanError, build_plan

# Reference server (Atlas 800T A2, 8 x 910B3, 64 GB) for profiles no cluster uses.
REFERENCE_NPUS = 8
REFERENCE_HBM_GB = 64.0
# The largest deployment a profile may describe: 256 servers x 8 NPUs. Checked before a
# plan is built, so an absurd DP x TP x PP is refused instead of filling memory.
MAX_WORLD_SIZE = 2048


class InventoryInvalid(Exception):
    """Field-keyed reasons a write was refused (HTTP 400)."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))


class InventoryConflict(Exception):
    """The write is valid but the current state forbids it (HTTP 409)."""


def _clean(obj: models.Model) -> None:
    try:
        obj.full_clean()
    except ValidationError as exc:
        raise InventoryInvalid(
            {k: [str(m) for m in v] for k, v in exc.message_dict.items()}
        ) from exc


def _plan_errors(exc: PlanError, *, where: str) -> dict[str, list[str]]:
    """Field-keyed plan errors; hardware-bound ones (memory, nodes) say where."""
    return {
        field: [
            f"{where}: {msg}" if field in ("memory", "nodes") else msg for msg in msgs
        ]
        for field, msgs in exc.errors.items()
    }


def _reference_nodes(profile: EngineProfile) -> list[NodeSpec]:
    """Enough reference servers for the profile's world size (DP x TP x PP)."""
    count = max(1, math.ceil(profile.world_size / REFERENCE_NPUS))
    return [
        NodeSpec(
            name=f"reference-{rank}",
            rank=rank,
            role="head" if rank == 0 else "worker",
            host_ip=f"10.0.{rank // 250}.{rank % 250 + 1}",
            nic_name="enp189s0f0",
            npu_count=REFERENCE_NPUS,
            hbm_gb=REFERENCE_HBM_GB,
            npu_ips=[f"198.51.{rank}.{i + 1}" for i in range(REFERENCE_NPUS)],
            api_port=8000,
            rpc_port=13345,
            link_mode=LinkMode.HCCS,
            driver="systemd",
        )
        for rank in range(count)
    ]


def profile_validate_plan(*, profile: EngineProfile) -> None:
    """Build the plan for each cluster using the profile (reference servers if none)."""
    if profile.world_size > MAX_WORLD_SIZE:
        msg = _(
            "DP x TP x PP = {dp} x {tp} x {pp} = {n} NPUs; the console plans at most {max} "
            "(256 servers of 8 NPUs): lower data_parallel_size, tensor_parallel_size or "
            "pipeline_parallel_size."
        ).format(
            dp=profile.data_parallel_size,
            tp=profile.tensor_parallel_size,
            pp=profile.pipeline_parallel_size,
            n=profile.world_size,
            max=MAX_WORLD_SIZE,
        )
        raise InventoryInvalid({"world_size": [msg]})
    clusters = list(Cluster.objects.filter(profile_id=profile.pk)) if profile.pk else []
    clusters = [c for c in clusters if c.ranked_nodes() and not c.membership_errors()]
    if not clusters:
        try:
            build_plan(
                profile.name,
                _reference_nodes(profile),
                profile_spec(profile, nodes=len(_reference_nodes(profile))),
                console_health_timeout_s=settings.ENGINE_HEALTH_TIMEOUT_S,
            )
        except PlanError as exc:
            where = _("on {n} reference servers of {npus} x {hbm:g} GB").format(
                n=len(_reference_nodes(profile)),
                npus=REFERENCE_NPUS,
                hbm=REFERENCE_HBM_GB,
            )
            raise InventoryInvalid(_plan_errors(exc, where=where)) from exc
        return
    for cluster in clusters:
        try:
            cluster_plan(cluster, profile=profile)
        except PlanError as exc:
            raise InventoryInvalid(
                _plan_errors(exc, where=_("cluster {c}").format(c=cluster.name))
            ) from exc


def cluster_validate_plan(*, cluster: Cluster) -> None:
    """Build the cluster's launch plan once its membership is complete."""
    if not cluster.ranked_nodes() or cluster.membership_errors():
        return
    try:
        cluster_plan(cluster)
    except PlanError as exc:
        raise InventoryInvalid(
            _plan_errors(exc, where=_("cluster {c}").format(c=cluster.name))
        ) from exc


def _active_operation_guard(cluster: Cluster | None) -> None:
    if cluster is None:
        return
    active = cluster.operations.filter(finished_at__isnull=True).first()
    if active is not None:
        raise InventoryConflict(
            _(
                "Operation {pk} ({kind}) is active on cluster {c}; "
                "wait for it or cancel it."
            ).format(pk=active.pk, kind=active.kind, c=cluster.name)
        )


def _write(
    obj: models.Model,
    *,
    changes: dict[str, Any],
    action: str,
    validate: Any,
    actor: Any,
    request: Any,
) -> models.Model:
    before = snapshot(obj) if obj.pk else None
    for field, value in changes.items():
        setattr(obj, field, value)
    with transaction.atomic():
        _clean(obj)
        obj.save()
        validate()  # after save so the plan sees the new row; errors roll the save back
        audit_record(
            action=action,
            actor=actor,
            request=request,
            target=obj,
            before=before,
            after=snapshot(obj),
        )
    return obj


def _release_version(
    profile: EngineProfile, changes: dict[str, Any], actor: Any, request: Any
) -> None:
    """The vllm-ascend version must be a release of the matrix, unless overridden (audited)."""
    changes = dict(changes)
    override = bool(changes.pop("vllm_ascend_override", False))
    version = changes.get("vllm_ascend_version", profile.vllm_ascend_version) or ""
    if not version or compat.release(version) is not None:
        return
    if not override:
        known = ", ".join(list(compat.releases())[:12])
        raise InventoryInvalid(
            {
                "vllm_ascend_version": [
                    _(
                        "{v} is not in vllm-ascend's release compatibility matrix; "
                        "choose one of: {known}, … (or set vllm_ascend_override as an admin)."
                    ).format(v=version, known=known)
                ]
            }
        )
    audit_record(
        action="profile.version_override",
        actor=actor,
        request=request,
        target=profile,
        before=None,
        after={"vllm_ascend_version": version, "matrix": compat.source()["commit"]},
    )


def profile_create(
    *, data: dict[str, Any], actor: Any, request: Any = None
) -> EngineProfile:
    profile = EngineProfile()
    with transaction.atomic():
        obj = _write(
            profile,
            changes={k: v for k, v in data.items() if k != "vllm_ascend_override"},
            action="profile.create",
            validate=lambda: profile_validate_plan(profile=profile),
            actor=actor,
            request=request,
        )
        _release_version(profile, data, actor, request)
    return obj  # type: ignore[return-value]


def profile_update(
    *, profile: EngineProfile, changes: dict[str, Any], actor: Any, request: Any = None
) -> EngineProfile:
    with transaction.atomic():
        obj = _write(
            profile,
            changes={k: v for k, v in changes.items() if k != "vllm_ascend_override"},
            action="profile.update",
            validate=lambda: profile_validate_plan(profile=profile),
            actor=actor,
            request=request,
        )
        _release_version(profile, changes, actor, request)
    return obj  # type: ignore[return-value]


def profile_delete(*, profile: EngineProfile, actor: Any, request: Any = None) -> None:
    users = sorted(profile.clusters.values_list("name", flat=True))
    if users:
        raise InventoryConflict(
            _(
                "Clusters {names} use this profile; give them another profile first."
            ).format(names=", ".join(users))
        )
    _audited_delete(profile, action="profile.delete", actor=actor, request=request)


def _audited_delete(obj: Any, *, action: str, actor: Any, request: Any) -> None:
    """Delete ``obj`` and write its audit row (its last state) in one transaction."""
    with transaction.atomic():
        audit_record(
            action=action,
            actor=actor,
            request=request,
            target=obj,
            before=snapshot(obj),
        )
        obj.delete()


def cluster_create(*, data: dict[str, Any], actor: Any, request: Any = None) -> Cluster:
    cluster = Cluster()
    return _write(
        cluster,
        changes=data,
        action="cluster.create",
        validate=lambda: None,
        actor=actor,
        request=request,
    )  # type: ignore[return-value]


def cluster_update(
    *, cluster: Cluster, changes: dict[str, Any], actor: Any, request: Any = None
) -> Cluster:
    """Rename/re-profile only between operations; a new profile must plan."""
    changed = {k for k, v in changes.items() if getattr(cluster, k) != v}
    if {"name", "profile"} & changed:
        _active_operation_guard(cluster)
    return _write(
        cluster,
        changes=changes,
        action="cluster.update",
        validate=lambda: (
            cluster_validate_plan(cluster=cluster) if "profile" in changed else None
        ),
        actor=actor,
        request=request,
    )  # type: ignore[return-value]


def cluster_delete(*, cluster: Cluster, actor: Any, request: Any = None) -> None:
    _active_operation_guard(cluster)
    members = sorted(cluster.nodes.values_list("name", flat=True))
    if members:
        raise InventoryConflict(
            _("Remove its nodes first: {names}.").format(names=", ".join(members))
        )
    _audited_delete(cluster, action="cluster.delete", actor=actor, request=request)


def node_create(*, data: dict[str, Any], actor: Any, request: Any = None) -> Node:
    node = Node()
    _active_operation_guard(data.get("cluster"))
    return _write(
        node,
        changes=data,
        action="node.create",
        validate=lambda: None,
        actor=actor,
        request=request,
    )  # type: ignore[return-value]


def node_update(
    *, node: Node, changes: dict[str, Any], actor: Any, request: Any = None
) -> Node:
    _active_operation_guard(node.cluster)
    if "cluster" in changes:
        _active_operation_guard(changes["cluster"])
    return _write(
        node,
        changes=changes,
        action="node.update",
        validate=lambda: None,
        actor=actor,
        request=request,
    )  # type: ignore[return-value]


def node_delete(*, node: Node, actor: Any, request: Any = None) -> None:
    _active_operation_guard(node.cluster)
    _audited_delete(node, action="node.delete", actor=actor, request=request)

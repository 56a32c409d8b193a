"""Writes to the inventory: the demo seed and the demo users."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from console.constants import ROLES
from console.models import Cluster, EngineProfile, Node, NodeRole
from console.permissions import set_user_role
from console.services.audit import audit_record, snapshot
from engine.capabilities import SERVER_MODELS
from engine.tuning import TUNING_OPTIONS

DEMO_MODEL = "qwen3.5"
# Every option of the tutorial (engine/tuning.py): both demo clusters span servers.
DEMO_TUNING = tuple(option.key for option in TUNING_OPTIONS)

DEMO_PROFILES: dict[str, dict[str, Any]] = {
    "bf16": {
        "name": "Qwen3.5-397B-A17B BF16, DP4 × TP8 + EP",
        "model_path": "/data/models/Qwen3.5-397B-A17B",
        "served_model_name": DEMO_MODEL,
        "vllm_version": "0.23.0",
        "vllm_ascend_version": "0.23.0",
        "mode": EngineProfile.MultiNodeMode.DP,
        "data_parallel_size": 4,
        "tensor_parallel_size": 8,
        "pipeline_parallel_size": 1,
        "expert_parallel": True,
        "dtype": EngineProfile.Dtype.BFLOAT16,
        "quantization": EngineProfile.Quantization.NONE,
        "weight_bits": 16,
        "max_model_len": 32768,
        "max_num_seqs": 16,
        "max_num_batched_tokens": 4096,
        "gpu_memory_utilization": 0.9,
        "enable_prefix_caching": True,
        "api_server_count": 1,
        "extra_flags": [],
        "extra_env": {},
    },
    "w8a8": {
        "name": "Qwen3.5-397B-A17B W8A8, DP2 × TP8 + EP",
        "model_path": "/data/models/Qwen3.5-397B-A17B-w8a8-mtp",
        "served_model_name": DEMO_MODEL,
        "vllm_version": "0.23.0",
        "vllm_ascend_version": "0.23.0",
        "mode": EngineProfile.MultiNodeMode.DP,
        "data_parallel_size": 2,
        "tensor_parallel_size": 8,
        "pipeline_parallel_size": 1,
        "expert_parallel": True,
        "dtype": EngineProfile.Dtype.BFLOAT16,
        "quantization": EngineProfile.Quantization.ASCEND,
        "weight_bits": 8,
        "max_model_len": 32768,
        "max_num_seqs": 16,
        "max_num_batched_tokens": 4096,
        "gpu_memory_utilization": 0.9,
        "enable_prefix_caching": False,
        "api_server_count": 1,
        "extra_flags": [],
        "extra_env": {},
    },
}
# Model facts shared by both profiles (Qwen3.5-397B-A17B; shared/reference/vllm-facts.md §5).
QWEN35_FACTS = {
    "total_params_b": 397.0,
    "active_params_b": 17.0,
    "num_layers": 60,
    "num_experts": 512,
    "hidden_size": 4096,
    "num_kv_heads": 2,
    "head_dim": 256,
    "kv_layers": 15,
}


@dataclass(frozen=True)
class DemoNode:
    name: str
    cluster: str | None
    rank: int | None

    @property
    def index(self) -> int:
        return int(self.name.rsplit("-", 1)[1])


DEMO_CLUSTERS = {
    "qwen35-prod": ("bf16", "Production: 4 × Atlas 800T A2"),
    "qwen35-standby": ("w8a8", "Standby replica: 2 × Atlas 800T A2"),
}
DEMO_NODES = [
    DemoNode("ascend-01", "qwen35-prod", 0),
    DemoNode("ascend-02", "qwen35-prod", 1),
    DemoNode("ascend-03", "qwen35-prod", 2),
    DemoNode("ascend-04", "qwen35-prod", 3),
    DemoNode("ascend-05", "qwen35-standby", 0),
    DemoNode("ascend-06", "qwen35-standby", 1),
    DemoNode("ascend-07", None, None),
]


def demo_node_fields(node: DemoNode) -> dict[str, Any]:
    """Fields of a simulated demo node. Each sim node gets its own loopback address and
    distinct ports, so all seven run on one machine without clashing."""
    k = node.index
    role = (
        NodeRole.SPARE
        if node.cluster is None
        else (NodeRole.HEAD if node.rank == 0 else NodeRole.WORKER)
    )
    return {
        "hostname": node.name,
        "management_ip": f"127.0.1.{k}",
        "nic_name": "enp189s0f0",
        "npu_ips": [f"127.10.{k}.{i + 1}" for i in range(8)],
        "rank": node.rank,
        "role": role,
        "server_model": "Atlas 800T A2",
        "npu_model": "Ascend 910B3",
        "npu_count": 8,
        "hbm_per_npu_gb": 64,
        "api_port": 18000 + k,
        "rpc_port": 13300 + k,
        "driver": Node.Driver.SIM,
    }


@transaction.atomic
def demo_seed(*, actor: Any = None) -> dict[str, int]:
    """Create the demo inventory (DESIGN.md "Defaults") where it is missing; idempotent.

    Objects that already exist are left as they are: an operator's later changes
    (a replaced node, a moved link mode) survive the next ``make run``. Returns
    the counts of created objects.
    """
    created = {"profiles": 0, "clusters": 0, "nodes": 0}
    profiles: dict[str, EngineProfile] = {}
    for key, fields in DEMO_PROFILES.items():
        # the demo serves as vllm-ascend's Qwen3.5-397B-A17B multi-node tutorial does
        values = {**fields, **QWEN35_FACTS, "tuning": list(DEMO_TUNING)}
        name = values.pop("name")
        profile = EngineProfile.objects.filter(name=name).first()
        if profile is None:
            profile = EngineProfile(name=name, **values)
            profile.full_clean()
            profile.save()
            created["profiles"] += 1
        profiles[key] = profile
    clusters: dict[str, Cluster] = {}
    for name, (profile_key, description) in DEMO_CLUSTERS.items():
        cluster, was_created = Cluster.objects.get_or_create(
            name=name,
            defaults={"profile": profiles[profile_key], "description": description},
        )
        clusters[name] = cluster
        created["clusters"] += int(was_created)
    for demo in DEMO_NODES:
        if Node.objects.filter(name=demo.name).exists():
            continue
        node = Node(
            name=demo.name,
            cluster=clusters[demo.cluster] if demo.cluster else None,
            **demo_node_fields(demo),
        )
        node.full_clean()
        node.save()
        created["nodes"] += 1
    if any(created.values()):
        for cluster in clusters.values():
            if problems := cluster.membership_errors():
                raise ValueError("; ".join(problems))
        audit_record(
            action="inventory.seed_demo",
            actor=actor,
            target_repr="demo inventory",
            after=dict(created),
        )
    return created


def credentials_path() -> Path:
    return Path(settings.VAR_DIR) / "demo-credentials.txt"


def demo_users_ensure() -> dict[str, str] | None:
    """Create the demo users admin/operator/viewer with random passwords, once.

    Returns {username: password} when passwords were (re)generated — they are written
    to var/demo-credentials.txt (mode 0600) — or None when users and file already exist.
    """
    users = get_user_model()
    path = credentials_path()
    if path.exists() and users.objects.filter(username__in=ROLES).count() == len(ROLES):
        return None
    passwords: dict[str, str] = {}
    with transaction.atomic():
        for role in ROLES:
            user, _ = users.objects.get_or_create(username=role)
            password = secrets.token_urlsafe(12)
            user.set_password(password)
            user.save()
            set_user_role(user, role)
            passwords[role] = password
            audit_record(
                action="user.demo_create",
                target=user,
                after={"username": role, "role": role},
            )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(
            "# Demo logins for the Ascend vLLM Ops Console (generated by make run)\n"
        )
        for role, password in passwords.items():
            fh.write(f"{role}\t{password}\n")
    return passwords


def node_update(*, node: Node, actor: Any, request: Any = None, **changes: Any) -> Node:
    """Change inventory fields of one node with validation and an audit row; nothing saved on error."""
    before = snapshot(node)
    for field, value in changes.items():
        setattr(node, field, value)
    node.full_clean()
    with transaction.atomic():  # the change and its audit row, or neither
        node.save()
        audit_record(
            action="node.update",
            actor=actor,
            request=request,
            target=node,
            before=before,
            after=snapshot(node),
        )
    return node


def node_server_model_override(
    *, node: Node, model: str, reason: str, actor: Any, request: Any = None
) -> Node:
    """Set (or, with model "", clear) a site's override of a node's server model.

    The override picks the link-fault remedy (engine/capabilities/servers.py) instead of what
    preflight detected; it needs a reason. Validation errors name the field; the change
    and its audit row commit together.
    """
    with transaction.atomic():
        node = Node.objects.select_for_update().get(pk=node.pk)
        before = snapshot(node)
        node.server_model_override = model
        node.server_model_override_reason = reason.strip() if model else ""
        node.full_clean()
        node.save(
            update_fields=[
                "server_model_override",
                "server_model_override_reason",
                "updated_at",
            ]
        )
        audit_record(
            action="node.server_model_override",
            actor=actor,
            request=request,
            target=node,
            before=before,
            after=snapshot(node),
            message=reason.strip()[:300],
        )
    return node


def node_server_model_detected(*, node: Node, detection: dict[str, Any]) -> Node:
    """Store what preflight detected (engine.parsers.server_model.ServerModelDetection
    as a dict: model, evidence, ...); a system action, audited when the model changes."""
    from django.utils import timezone

    model = str(detection.get("model") or "")
    if model not in SERVER_MODELS:
        model = "unknown"
    evidence = str(detection.get("evidence") or "")[:500]
    with transaction.atomic():
        node = Node.objects.select_for_update().get(pk=node.pk)
        changed = model != node.detected_server_model
        before = snapshot(node)
        node.detected_server_model = model
        node.detected_server_model_evidence = evidence
        node.detected_server_model_at = timezone.now()
        node.save(
            update_fields=[
                "detected_server_model",
                "detected_server_model_evidence",
                "detected_server_model_at",
                "updated_at",
            ]
        )
        if changed:
            audit_record(
                action="node.server_model_detected",
                target=node,
                before=before,
                after=snapshot(node),
                message=evidence,
            )
    return node

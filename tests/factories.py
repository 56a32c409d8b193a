"""Plain builders for test data (STYLE §5)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from console.models import Cluster, EngineProfile, Node, NodeRole
from console.permissions import set_user_role
from console.services.inventory import DEMO_PROFILES, QWEN35_FACTS


def make_user(username: str, role: str | None) -> Any:
    user = get_user_model().objects.create_user(
        username=username, password="pw-" + username
    )
    if role:
        set_user_role(user, role)
    return user


def make_profile(**overrides: Any) -> EngineProfile:
    values = {**DEMO_PROFILES["bf16"], **QWEN35_FACTS, **overrides}
    values.setdefault("name", "test profile")
    return EngineProfile.objects.create(**values)


def make_cluster(
    name: str = "test-cluster",
    nodes: int = 4,
    profile: EngineProfile | None = None,
    *,
    free_ports: bool = False,
) -> Cluster:
    """A cluster of ``nodes`` sim nodes, ranks 0..n-1, head at rank 0, each on its own loopback IP."""
    profile = profile or make_profile(name=f"profile for {name}")
    cluster = Cluster.objects.create(name=name, profile=profile)
    for rank in range(nodes):
        Node.objects.create(
            name=f"{name}-n{rank}",
            hostname=f"{name}-n{rank}",
            management_ip=f"127.0.2.{rank + 1}",
            npu_ips=[f"127.20.{rank + 1}.{i + 1}" for i in range(8)],
            cluster=cluster,
            rank=rank,
            role=NodeRole.HEAD if rank == 0 else NodeRole.WORKER,
            api_port=free_port() if free_ports else 28000 + rank,
            rpc_port=free_port() if free_ports else 23000 + rank,
            driver=Node.Driver.SIM,
        )
    return cluster


def free_port() -> int:
    """A free loopback TCP port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])

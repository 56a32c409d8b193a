"""The launch plan as the cluster page shows it: per node the exact ``vllm serve`` argv,
the environment and the systemd unit (what ``manage.py plan`` prints), with secrets
masked for anyone who is not an admin."""

from __future__ import annotations

import re
from typing import Any

from console.models import Cluster
from console.services.plans import cluster_plan
from engine.plans import PlanError
from engine.render import render_systemd_unit

UNIT_ENV_DIR = "/etc/vllm"  # as manage.py plan renders it
MASK = "••••••"
# Environment names whose values are credentials (never shown below admin).
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL", re.IGNORECASE)
SECRET_FLAGS = ("--api-key",)  # vLLM's serve flag that takes the engine's key


def _mask_argv(argv: list[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag in SECRET_FLAGS:
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out


def launch_plan(cluster: Cluster, *, admin: bool) -> dict[str, Any]:
    """``{"nodes": [{"name", "rank", "role", "argv", "env", "unit"}], "errors": [...]}``;
    errors (field: message) instead of nodes when the plan cannot work."""
    try:
        plan = cluster_plan(cluster)
    except PlanError as exc:
        return {
            "nodes": [],
            "errors": [
                f"{field}: {msg}" for field, msgs in exc.errors.items() for msg in msgs
            ],
        }
    nodes = []
    for n in plan.nodes:
        env = sorted(n.env.items())
        argv = list(n.argv)
        if not admin:
            env = [(k, MASK if SECRET_NAME.search(k) else v) for k, v in env]
            argv = _mask_argv(argv)
        nodes.append(
            {
                "name": n.name,
                "rank": n.rank,
                "role": n.role,
                "argv": argv,
                "env": env,
                "unit": render_systemd_unit(n, env_file=f"{UNIT_ENV_DIR}/{n.name}.env"),
            }
        )
    return {"nodes": nodes, "errors": [], "vllm_version": plan.vllm_version}

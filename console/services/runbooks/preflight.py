"""Preflight: parallel checks over the nodes, each pass / warn / fail with evidence and a fix."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from console.models import Node
from console.models.operations import (
    OperationStep,
    StepState,
)
from console.opschecks import check
from console.services.inventory import node_server_model_detected
from console.services.runbooks.base import Run
from console.services.weights import cross_node_checks, reported_config
from engine.plans import PlanError


def preflight_steps(run: Run) -> dict[str, OperationStep]:
    steps = {"reach": run.add_step("Agents reachable")}
    for node in run.nodes:
        steps[node.name] = run.add_step(f"Preflight checks on {node.name}", node)
    steps["consistency"] = run.add_step("Same versions and model on every node")
    steps["plan"] = run.add_step("Launch plan valid and fits in HBM")
    return steps


def npu_ip_checks(
    run: Run, node: Node, collected: list[str | None] | None, ping_targets: list[str]
) -> list[dict[str, Any]]:
    """The NPU IPs the node's NICs carry (``hccn_tool -ip -g``) must be the inventory's:
    the plans and every peer's ping use the inventory. No targets = no ping = a failure,
    never a silently missing check."""
    out: list[dict[str, Any]] = []
    inventory = list(node.npu_ips or [])
    if collected is not None:
        differ = [
            f"NPU {i}: inventory {want or '—'}, NIC {have or '—'}"
            for i, (want, have) in enumerate(
                zip(
                    inventory + [None] * (len(collected) - len(inventory)),
                    collected,
                    strict=False,
                )
            )
            if (want or None) != (have or None)
        ]
        out.append(
            check(
                "npu_ips_match.bad",
                "fail",
                problems="; ".join(differ[:8]),
                node=node.name,
            )
            if differ
            else check("npu_ips_match.ok", "pass", count=len(collected))
        )
    if not ping_targets and len(run.nodes) > 1:
        out.append(check("npu_ping.no_targets", "fail"))
    return out


def run_preflight(run: Run, steps: dict[str, OperationStep]) -> bool:
    """Run every check; returns True when nothing failed. Results land in op.result['preflight']."""
    table: dict[str, list[dict[str, Any]]] = {}
    ok = True
    step = steps["reach"]
    run.begin(step)
    beats = run.call_all(
        run.nodes,
        "node.heartbeat",
        timeout=settings.PREFLIGHT_REACH_TIMEOUT_S,
        kwargs_for=lambda n: {},
    )
    down = [name for name, answer in beats.items() if isinstance(answer, Exception)]
    for name, answer in beats.items():
        table.setdefault(name, []).append(
            check("agent_reachable.down", "fail", problem=answer, node=name)
            if isinstance(answer, Exception)
            else check(
                "agent_reachable.ok",
                "pass",
                hostname=answer["hostname"],
                pid=answer["pid"],
                driver=answer["driver"],
            )
        )
    if down:
        ok = False
        run.finish(step, f"no answer from {', '.join(down)}", state=StepState.FAILED)
    else:
        run.finish(step, f"{len(run.nodes)} agents answered")
    reachable = [n for n in run.nodes if n.name not in down]
    head = run.head()
    head_ips = list(head.npu_ips or [])
    peer_ips = list(run.nodes[1].npu_ips or []) if len(run.nodes) > 1 else []

    def checks_for(n: Node) -> dict[str, Any]:
        ports = [n.api_port, n.rpc_port] if n.pk == head.pk else []
        return {
            "expected_npus": n.npu_count,
            "host_ip": n.management_ip,
            "ports": ports,
            "model_path": run.cluster.profile.model_path,
            "ping_targets": peer_ips if n.pk == head.pk else head_ips,
            # versions checked against the release matrix (engine/compat.py)
            "vllm_ascend_version": run.cluster.profile.vllm_ascend_version,
        }

    for node in reachable:
        run.begin(steps[node.name])
    answers = run.call_all(
        reachable,
        "node.preflight",
        timeout=settings.PREFLIGHT_TIMEOUT_S,
        kwargs_for=checks_for,
    )
    versions: dict[str, dict[str, Any]] = {}
    sizes: dict[str, Any] = {}
    for node in run.nodes:
        step = steps[node.name]
        if node.name in down:
            run.finish(
                step, "agent unreachable; checks not run", state=StepState.SKIPPED
            )
            continue
        answer = answers[node.name]
        if isinstance(answer, Exception):
            ok = False
            table[node.name].append(check("preflight.error", "fail", problem=answer))
            run.finish(step, str(answer)[:300], state=StepState.FAILED)
            continue
        checks = answer["checks"] + npu_ip_checks(
            run,
            node,
            answer.get("npu_ips"),
            peer_ips if node.pk == head.pk else head_ips,
        )
        table[node.name].extend(checks)
        versions[node.name] = answer["versions"]
        if isinstance(answer.get("server_model"), dict):
            # engine/preflight.py check_server_model: npu-smi board + dmidecode product
            node_server_model_detected(node=node, detection=answer["server_model"])
        sizes[node.name] = answer["model_size"]
        failed = [c for c in checks if c["status"] == "fail"]
        warned = [c for c in checks if c["status"] == "warn"]
        if failed:
            ok = False
            run.finish(
                step,
                "; ".join(f"{c['name']}: {c['evidence']}" for c in failed),
                state=StepState.FAILED,
                data={"checks": checks},
            )
        else:
            run.finish(
                step,
                f"{len(checks)} checks passed"
                + (f", {len(warned)} warnings" if warned else ""),
                state=StepState.WARNING if warned else StepState.SUCCEEDED,
                data={"checks": checks},
            )
    step = steps["consistency"]
    run.begin(step)
    problems = []
    for key in ("driver", "firmware", "cann", "vllm", "vllm_ascend", "torch_npu"):
        seen: dict[Any, list[str]] = {}
        for name, v in versions.items():
            seen.setdefault(v.get(key), []).append(name)
        if len(seen) > 1:
            detail = "; ".join(
                f"{value} on {', '.join(names)}" for value, names in seen.items()
            )
            problems.append(f"{key} differs: {detail}")
            for value, names in seen.items():
                if len(names) < max(len(x) for x in seen.values()):
                    for name in names:
                        table[name].append(
                            check(
                                "version.differs",
                                "fail",
                                key=key,
                                value=value,
                                node=name,
                                detail=detail,
                            )
                        )
    # the same model files on every node, named file by file (console/services/weights.py)
    answered = {n: a for n, a in answers.items() if not isinstance(a, Exception)}
    for name, checks in cross_node_checks(answered, run.cluster.profile).items():
        table.setdefault(name, []).extend(checks)
        problems.extend(
            f"{name}: {c['evidence']}" for c in checks if c["status"] == "fail"
        )
    run.model_config = reported_config(answered)
    if len(set(sizes.values())) > 1:
        problems.append(
            "model size differs: " + ", ".join(f"{n}={s}" for n, s in sizes.items())
        )
    if problems:
        ok = False
        run.finish(
            step,
            " | ".join(problems),
            state=StepState.FAILED,
            data={"versions": versions},
        )
    else:
        run.finish(
            step,
            "identical on every node" if versions else "no node answered",
            data={"versions": versions},
        )
    step = steps["plan"]
    run.begin(step)
    try:
        run.plan = run.build_plan()
    except PlanError as exc:
        ok = False
        flat = [f"{field}: {msg}" for field, msgs in exc.errors.items() for msg in msgs]
        table.setdefault("cluster", []).append(
            check("launch_plan.bad", "fail", problems=" ".join(flat))
        )
        run.finish(
            step,
            " ".join(flat),
            state=StepState.FAILED,
            data={"errors": exc.errors},
        )
    else:
        table.setdefault("cluster", []).append(
            check(
                "launch_plan.ok",
                "warn" if run.plan.warnings else "pass",
                detail=" ".join([run.plan.fit.detail, *run.plan.warnings]),
            )
        )
        run.finish(step, run.plan.fit.detail, data={"fit": run.plan.fit.to_dict()})
    run.result["preflight"] = {"ok": ok, "nodes": table}
    return ok

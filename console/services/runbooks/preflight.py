"""Preflight: parallel checks over the nodes, each pass / warn / fail with evidence and a fix.

``run_preflight`` reads as its rows, in order: agents reachable, the checks on each
node, the same versions and model on every node, a launch plan that fits.
"""

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


class Findings:
    """What preflight has found so far, shared by its steps.

    ``table`` the checks per node (and ``cluster``), ``down`` the agents that did not
    answer, ``answers`` each reachable node's preflight answer (or its exception),
    ``versions`` and ``sizes`` what the answering nodes report, ``ok`` nothing failed.
    """

    def __init__(self) -> None:
        self.ok = True
        self.table: dict[str, list[dict[str, Any]]] = {}
        self.down: list[str] = []
        self.answers: dict[str, Any] = {}
        self.versions: dict[str, dict[str, Any]] = {}
        self.sizes: dict[str, Any] = {}


def run_preflight(run: Run, steps: dict[str, OperationStep]) -> bool:
    """Run every check; returns True when nothing failed. Results land in op.result['preflight']."""
    found = Findings()
    agents_reachable(run, steps["reach"], found)
    checks_on_each_node(run, steps, found)
    same_on_every_node(run, steps["consistency"], found)
    launch_plan_fits(run, steps["plan"], found)
    run.result["preflight"] = {"ok": found.ok, "nodes": found.table}
    return found.ok


def agents_reachable(run: Run, step: OperationStep, found: Findings) -> None:
    """Heartbeat every agent at once; a node that does not answer fails the row."""
    run.begin(step)
    beats = run.call_all(
        run.nodes,
        "node.heartbeat",
        timeout=settings.PREFLIGHT_REACH_TIMEOUT_S,
        kwargs_for=lambda n: {},
    )
    found.down = [
        name for name, answer in beats.items() if isinstance(answer, Exception)
    ]
    for name, answer in beats.items():
        found.table.setdefault(name, []).append(
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
    if found.down:
        found.ok = False
        run.finish(
            step, f"no answer from {', '.join(found.down)}", state=StepState.FAILED
        )
    else:
        run.finish(step, f"{len(run.nodes)} agents answered")


def checks_on_each_node(
    run: Run, steps: dict[str, OperationStep], found: Findings
) -> None:
    """Run node.preflight on every reachable agent at once, then record each node's row."""
    reachable = [n for n in run.nodes if n.name not in found.down]
    head = run.head()
    head_ips = list(head.npu_ips or [])
    peer_ips = list(run.nodes[1].npu_ips or []) if len(run.nodes) > 1 else []

    def ping_targets(n: Node) -> list[str]:
        return peer_ips if n.pk == head.pk else head_ips

    def checks_for(n: Node) -> dict[str, Any]:
        ports = [n.api_port, n.rpc_port] if n.pk == head.pk else []
        return {
            "expected_npus": n.npu_count,
            "host_ip": n.management_ip,
            "ports": ports,
            "model_path": run.cluster.profile.model_path,
            "ping_targets": ping_targets(n),
            # versions checked against the release matrix (engine/compat.py)
            "vllm_ascend_version": run.cluster.profile.vllm_ascend_version,
        }

    for node in reachable:
        run.begin(steps[node.name])
    found.answers = run.call_all(
        reachable,
        "node.preflight",
        timeout=settings.PREFLIGHT_TIMEOUT_S,
        kwargs_for=checks_for,
    )
    for node in run.nodes:
        record_node_answer(run, steps[node.name], node, ping_targets(node), found)


def record_node_answer(
    run: Run,
    step: OperationStep,
    node: Node,
    ping_targets: list[str],
    found: Findings,
) -> None:
    """Finish one node's row from its answer: skipped, failed, warned or passed."""
    if node.name in found.down:
        run.finish(step, "agent unreachable; checks not run", state=StepState.SKIPPED)
        return
    answer = found.answers[node.name]
    if isinstance(answer, Exception):
        found.ok = False
        found.table[node.name].append(check("preflight.error", "fail", problem=answer))
        run.finish(step, str(answer)[:300], state=StepState.FAILED)
        return
    checks = answer["checks"] + npu_ip_checks(
        run, node, answer.get("npu_ips"), ping_targets
    )
    found.table[node.name].extend(checks)
    found.versions[node.name] = answer["versions"]
    if isinstance(answer.get("server_model"), dict):
        # engine/preflight/host.py check_server_model: npu-smi board + dmidecode product
        node_server_model_detected(node=node, detection=answer["server_model"])
    found.sizes[node.name] = answer["model_size"]
    failed = [c for c in checks if c["status"] == "fail"]
    warned = [c for c in checks if c["status"] == "warn"]
    if failed:
        found.ok = False
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


def same_on_every_node(run: Run, step: OperationStep, found: Findings) -> None:
    """Versions, model files and model size must agree across the nodes that answered."""
    run.begin(step)
    problems = version_problems(found)
    # the same model files on every node, named file by file (console/services/weights.py)
    answered = {n: a for n, a in found.answers.items() if not isinstance(a, Exception)}
    for name, checks in cross_node_checks(answered, run.cluster.profile).items():
        found.table.setdefault(name, []).extend(checks)
        problems.extend(
            f"{name}: {c['evidence']}" for c in checks if c["status"] == "fail"
        )
    run.model_config = reported_config(answered)
    if len(set(found.sizes.values())) > 1:
        problems.append(
            "model size differs: "
            + ", ".join(f"{n}={s}" for n, s in found.sizes.items())
        )
    if problems:
        found.ok = False
        run.finish(
            step,
            " | ".join(problems),
            state=StepState.FAILED,
            data={"versions": found.versions},
        )
    else:
        run.finish(
            step,
            "identical on every node" if found.versions else "no node answered",
            data={"versions": found.versions},
        )


def version_problems(found: Findings) -> list[str]:
    """One problem per version key that differs; a fail check on each node in the minority."""
    problems = []
    for key in ("driver", "firmware", "cann", "vllm", "vllm_ascend", "torch_npu"):
        seen: dict[Any, list[str]] = {}
        for name, v in found.versions.items():
            seen.setdefault(v.get(key), []).append(name)
        if len(seen) > 1:
            detail = "; ".join(
                f"{value} on {', '.join(names)}" for value, names in seen.items()
            )
            problems.append(f"{key} differs: {detail}")
            for value, names in seen.items():
                if len(names) < max(len(x) for x in seen.values()):
                    for name in names:
                        found.table[name].append(
                            check(
                                "version.differs",
                                "fail",
                                key=key,
                                value=value,
                                node=name,
                                detail=detail,
                            )
                        )
    return problems


def launch_plan_fits(run: Run, step: OperationStep, found: Findings) -> None:
    """Build the launch plan (run.plan); a PlanError fails the row with every field's error."""
    run.begin(step)
    try:
        run.plan = run.build_plan()
    except PlanError as exc:
        found.ok = False
        flat = [f"{field}: {msg}" for field, msgs in exc.errors.items() for msg in msgs]
        found.table.setdefault("cluster", []).append(
            check("launch_plan.bad", "fail", problems=" ".join(flat))
        )
        run.finish(
            step,
            " ".join(flat),
            state=StepState.FAILED,
            data={"errors": exc.errors},
        )
    else:
        found.table.setdefault("cluster", []).append(
            check(
                "launch_plan.ok",
                "warn" if run.plan.warnings else "pass",
                detail=" ".join([run.plan.fit.detail, *run.plan.warnings]),
            )
        )
        run.finish(step, run.plan.fit.detail, data={"fit": run.plan.fit.to_dict()})

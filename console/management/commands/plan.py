from __future__ import annotations

import json
import shlex
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.models import Cluster
from console.services.plans import cluster_plan
from engine.drivers.base import EngineSpec
from engine.drivers.container import CLUSTER_KEY, render_container_unit, run_argv
from engine.plans import ClusterPlan, NodePlan, PlanError
from engine.render import render_shell, render_systemd_unit

UNIT_ENV_DIR = "/etc/vllm"


def _continued(argv: list[str]) -> list[str]:
    """docker run argv as shell lines: one option (with its value) a line, then the
    image and the command on the last line, as in vllm-ascend's docs."""
    lines, i = [" ".join(argv[:3])], 3
    while i < len(argv) and argv[i].startswith("-"):
        if "=" not in argv[i] and argv[i] not in ("--rm", "--detach"):
            lines.append(f"{argv[i]} {shlex.quote(argv[i + 1])}")
            i += 2
        else:
            lines.append(shlex.quote(argv[i]))
            i += 1
    lines.append(" ".join(shlex.quote(a) for a in argv[i:]))
    return lines


class Command(BaseCommand):
    help = (
        "Print the launch plan of a cluster: the exact `vllm serve` argv and environment per node "
        "(rank order), the systemd unit per node and the HBM fit. --json prints "
        '{"cluster", "vllm_version", "nodes": [{"name", "rank", "role", "argv", "env", "systemd_unit"}], "fit"} for diffing.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("cluster", help="cluster name, e.g. qwen35-prod")
        parser.add_argument(
            "--json", action="store_true", help="machine-readable output"
        )
        parser.add_argument("--node", help="only this node")
        parser.add_argument(
            "--shell",
            action="store_true",
            help="print the per-node shell script instead of the summary",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = self._cluster(options["cluster"])
        plan = self._plan(cluster)
        nodes = self._nodes(plan, cluster, options["node"])
        # container-driver ranks: the docker run argv and the unit that runs it
        containers = {
            n.name: EngineSpec(n.name, n.rank, n.role, n.argv, n.env, "")
            for n in nodes
            if CLUSTER_KEY in n.env
        }
        units = {
            n.name: render_container_unit(containers[n.name])
            if n.name in containers
            else render_systemd_unit(n, env_file=f"{UNIT_ENV_DIR}/{n.name}.env")
            for n in nodes
        }
        if options["json"]:
            self._write_json(plan, nodes, containers, units)
            return
        if options["shell"]:
            for n in nodes:
                self.stdout.write(render_shell(n))
            return
        self._write_summary(plan, nodes, containers)

    def _cluster(self, name: str) -> Cluster:
        """The cluster and its profile; CommandError naming the known ones."""
        try:
            return Cluster.objects.select_related("profile").get(name=name)
        except Cluster.DoesNotExist:
            names = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
            raise CommandError(
                f"cluster {name!r} does not exist; known clusters: {names}"
            ) from None

    def _plan(self, cluster: Cluster) -> ClusterPlan:
        """The cluster's plan; CommandError listing each field's problems."""
        try:
            return cluster_plan(cluster)
        except PlanError as exc:
            lines = [
                f"  {field}: {msg}"
                for field, msgs in exc.errors.items()
                for msg in msgs
            ]
            raise CommandError(
                f"the plan for {cluster.name} cannot work:\n" + "\n".join(lines)
            ) from None

    def _nodes(
        self, plan: ClusterPlan, cluster: Cluster, node: str | None
    ) -> list[NodePlan]:
        """The plan's nodes, or only ``node``; CommandError naming the members."""
        nodes = plan.nodes
        if node:
            nodes = [n for n in nodes if n.name == node]
            if not nodes:
                raise CommandError(
                    f"node {node!r} is not a member of {cluster.name}; members: {', '.join(n.name for n in plan.nodes)}"
                )
        return nodes

    def _write_json(
        self,
        plan: ClusterPlan,
        nodes: list[NodePlan],
        containers: dict[str, EngineSpec],
        units: dict[str, str],
    ) -> None:
        """The plan as one JSON document (the shape the command's help names)."""
        data = {
            "cluster": plan.cluster,
            "vllm_version": plan.vllm_version,
            "nodes": [
                {
                    **n.to_dict(),
                    "systemd_unit": units[n.name],
                    **(
                        {"container_argv": run_argv(containers[n.name], detach=False)}
                        if n.name in containers
                        else {}
                    ),
                }
                for n in nodes
            ],
            "fit": plan.fit.to_dict(),
            "warnings": list(plan.warnings),
        }
        self.stdout.write(json.dumps(data, indent=2, ensure_ascii=False))

    def _write_summary(
        self,
        plan: ClusterPlan,
        nodes: list[NodePlan],
        containers: dict[str, EngineSpec],
    ) -> None:
        """Per rank in start order: its env and argv (or docker run), then the HBM fit."""
        self.stdout.write(
            f"Cluster {plan.cluster} · vLLM {plan.vllm_version} · start in this order, stop in reverse\n"
        )
        for n in nodes:
            self.stdout.write(
                self.style.MIGRATE_HEADING(f"rank {n.rank} · {n.name} · {n.role}")
            )
            if n.name in containers:
                argv = run_argv(containers[n.name], detach=False)
                self.stdout.write("  " + " \\\n    ".join(_continued(argv)))
                self.stdout.write("")
                continue
            for key, value in n.env.items():
                self.stdout.write(f"  {key}={value}")
            self.stdout.write("  " + " ".join(n.argv))
            self.stdout.write("")
        self.stdout.write(f"HBM fit: {plan.fit.detail}")
        for warning in plan.warnings:  # timeout rules passed only with a risk
            self.stdout.write(self.style.WARNING(f"warning: {warning}"))

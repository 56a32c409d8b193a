from __future__ import annotations

import asyncio
import getpass
import json
import time
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.models import Cluster, Operation, OperationState
from console.services.agents import AgentUnreachable, agent_call
from console.services.operations import (
    OperationConflict,
    OperationRefused,
    operation_group,
    operation_start,
)

ICONS = {
    "pending": "·",
    "running": "…",
    "succeeded": "✓",
    "warning": "!",
    "failed": "✗",
    "skipped": "-",
    "rolled_back": "↺",
}


class Command(BaseCommand):
    help = (
        "Operate a cluster: preflight, start (rank order), stop (reverse order), restart, verify_weights (sha256 of every model file on every node, compared; runs while serving), or show its status. "
        "With --wait the steps are printed as they happen and the exit status is 0 only on success."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "action",
            choices=[
                "preflight",
                "start",
                "stop",
                "restart",
                "verify_weights",
                "status",
            ],
        )
        parser.add_argument("cluster", help="cluster name, e.g. qwen35-prod")
        parser.add_argument(
            "--wait", action="store_true", help="follow the operation until it ends"
        )
        parser.add_argument(
            "--reason", default="", help="why (recorded in the audit log)"
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="start even if preflight fails (audited)",
        )
        parser.add_argument(
            "--warmup",
            type=int,
            default=None,
            help="warm-up requests after start (default WARMUP_REQUESTS, 100)",
        )
        parser.add_argument(
            "--json", action="store_true", help="status: machine-readable output"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = Cluster.objects.select_related("profile").get(
                name=options["cluster"]
            )
        except Cluster.DoesNotExist:
            names = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
            raise CommandError(
                f"cluster {options['cluster']!r} does not exist; known clusters: {names}"
            ) from None
        if options["action"] == "status":
            self.status(cluster, as_json=options["json"])
            return
        params: dict[str, Any] = {}
        if options["warmup"] is not None:
            params["warmup_requests"] = options["warmup"]
        try:
            op = operation_start(
                cluster=cluster,
                kind=options["action"],
                reason=options["reason"],
                source="cli",
                force=options["force"],
                params=params,
                actor=f"cli:{getpass.getuser()}",
            )
        except (OperationConflict, OperationRefused) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Operation #{op.pk}: {op.get_kind_display()} {cluster.name} queued"
        )
        if not options["wait"]:
            return
        final = self.follow(op)
        if final.state != OperationState.SUCCEEDED:
            raise CommandError(f"operation #{op.pk} {final.state}: {final.error}")
        self.stdout.write(
            self.style.SUCCESS(
                f"Operation #{op.pk} succeeded in {final.duration_s or 0:.1f}s"
            )
        )

    def follow(self, op: Operation) -> Operation:
        """Print step changes pushed on the operation's channel group until the operation ends."""
        return async_to_sync(self._follow)(op)

    async def _follow(self, op: Operation) -> Operation:
        # One event loop for the whole subscription: the Redis layer binds its queues to it.
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(operation_group(op.pk), channel)
        printed: dict[int, str] = {}

        def snapshot() -> tuple[bool, list[dict[str, Any]]]:
            op.refresh_from_db()
            return op.finished_at is not None, [s.to_dict() for s in op.steps.all()]

        try:
            finished, steps = await sync_to_async(snapshot)()
            for step in steps:  # what changed before we subscribed
                self.print_step(step, printed)
            while not finished:
                try:
                    message = await asyncio.wait_for(layer.receive(channel), 2.0)
                except TimeoutError:
                    message = None
                if message and message.get("step"):
                    self.print_step(message["step"], printed)
                if message is None or message.get("state") not in ("queued", "running"):
                    finished, steps = await sync_to_async(snapshot)()
            for step in steps:
                self.print_step(step, printed)
            return op
        finally:
            await layer.group_discard(operation_group(op.pk), channel)

    def print_step(self, step: dict[str, Any], printed: dict[int, str]) -> None:
        key = f"{step['state']}|{step['summary']}"
        if printed.get(step["seq"]) == key or step["state"] == "pending":
            return
        printed[step["seq"]] = key
        elapsed = f" ({step['elapsed_s']:.1f}s)" if step.get("elapsed_s") else ""
        line = (
            f"{ICONS.get(step['state'], '?')} {step['seq']:>2}. {step['name']}{elapsed}"
        )
        if step["summary"]:
            line += f" — {step['summary']}"
        self.stdout.write(line)
        for diag in step.get("diagnosis") or []:
            self.stdout.write(f"      diagnosis: {diag['cause']} → {diag['fix']}")

    def status(self, cluster: Cluster, *, as_json: bool) -> None:
        rows = []
        for node in cluster.ranked_nodes():
            try:
                engine = agent_call(node, "engine.status", timeout=5)
            except AgentUnreachable:
                engine = {"state": "agent unreachable"}
            rows.append(
                {
                    "node": node.name,
                    "rank": node.rank,
                    "role": node.role,
                    "link_mode": node.link_mode,
                    "engine": engine.get("state"),
                    "pid": engine.get("pid"),
                    "health": engine.get("health"),
                }
            )
        last = cluster.operations.first()
        data = {
            "cluster": cluster.name,
            "state": cluster.state,
            "nodes": rows,
            "last_operation": {"id": last.pk, "kind": last.kind, "state": last.state}
            if last
            else None,
        }
        if as_json:
            self.stdout.write(json.dumps(data, indent=2))
            return
        self.stdout.write(
            f"{cluster.name}: {cluster.get_state_display()} (since {cluster.state_changed_at:%Y-%m-%d %H:%M:%S})"
        )
        for row in rows:
            self.stdout.write(
                f"  rank {row['rank']} {row['node']:<12} {row['role']:<7} link={row['link_mode']:<5} engine={row['engine']} pid={row['pid']} health={row['health']}"
            )
        if last:
            self.stdout.write(f"Last operation: #{last.pk} {last.kind} {last.state}")
        time.sleep(0)

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.models import Node
from console.services.agents import AgentUnreachable, agent_call
from console.services.audit import audit_record

FAULTS = (
    "hccs-loss PCT",
    "roce-down",
    "overtemp CELSIUS",
    "npu-warning",
    "hbm-pressure PCT",
    "crash once|always",
    "slow-start SECONDS",
    "agent-stop",
    "hccs-unsupported",
    "garbled",
)


class Command(BaseCommand):
    help = (
        "Inject or clear simulated faults on a sim node, through its agent. Faults: "
        + "; ".join(FAULTS)
        + "."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        inject = sub.add_parser(
            "inject", help="inject a fault: sim inject NODE FAULT [VALUE]"
        )
        inject.add_argument("node")
        inject.add_argument("fault", help=" | ".join(f.split()[0] for f in FAULTS))
        inject.add_argument("value", nargs="?", default=None)
        clear = sub.add_parser("clear", help="clear every fault on NODE")
        clear.add_argument("node")
        state = sub.add_parser(
            "state", help="show NODE's simulated config, faults and engine"
        )
        state.add_argument("node")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            node = Node.objects.get(name=options["node"])
        except Node.DoesNotExist:
            raise CommandError(
                f"node {options['node']!r} does not exist; see python manage.py plan or the overview page"
            ) from None
        if node.driver != Node.Driver.SIM:
            raise CommandError(
                f"{node.name} runs the {node.driver} driver; faults can only be injected into simulated nodes"
            )
        action = options["action"]
        kwargs: dict[str, Any] = {}
        task = {"inject": "sim.inject", "clear": "sim.clear", "state": "sim.state"}[
            action
        ]
        if action == "inject":
            kwargs = {"fault": options["fault"], "value": options["value"]}
        try:
            result = agent_call(node, task, timeout=20, **kwargs)
        except AgentUnreachable as exc:
            raise CommandError(
                f"{exc}; is `make run` (or the node's agent) running?"
            ) from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if action != "state":
            audit_record(
                action=f"sim.{action}",
                target=node,
                after={"fault": options.get("fault"), "value": options.get("value")},
            )
        self.stdout.write(json.dumps(result, indent=2, ensure_ascii=False))

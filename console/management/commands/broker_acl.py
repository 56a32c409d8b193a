"""Print the broker's Redis ACL file, or one agent's broker URL (console/services/broker_acl.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.models import Node
from console.services.broker_acl import acl_file, agent_broker_url, console_password


class Command(BaseCommand):
    help = (
        "Print a Redis ACL file (aclfile) with one user per node agent, each confined to its "
        "own queue, and the console's user. --agent NODE --host H prints the agent's "
        "CELERY_BROKER_URL/CELERY_RESULT_BACKEND lines for its agent.env; --console prints "
        "the console's password."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", help="print this node's agent.env broker lines")
        parser.add_argument("--host", default="console.example.gov.cn")
        parser.add_argument("--port", type=int, default=6379)
        parser.add_argument("--db", type=int, default=0)
        parser.add_argument("--tls", action="store_true", help="rediss:// (Redis TLS)")
        parser.add_argument(
            "--console", action="store_true", help="print the console's password"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["console"]:
            self.stdout.write(console_password())
            return
        if options["agent"]:
            if not Node.objects.filter(name=options["agent"]).exists():
                raise CommandError(
                    f"no node {options['agent']!r}; add it in the inventory first"
                )
            url = agent_broker_url(
                options["agent"],
                options["host"],
                options["port"],
                options["db"],
                options["tls"],
            )
            self.stdout.write(f"CELERY_BROKER_URL={url}\nCELERY_RESULT_BACKEND={url}")
            return
        self.stdout.write(
            acl_file(
                list(Node.objects.order_by("name").values_list("name", flat=True))
            ),
            ending="",
        )

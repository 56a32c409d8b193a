from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from console.services.inventory import demo_seed


class Command(BaseCommand):
    help = (
        "Create the demo inventory where it is missing: cluster qwen35-prod (ascend-01..04, BF16 DP4 x TP8 + EP), "
        "standby qwen35-standby (ascend-05..06, W8A8 DP2 x TP8 + EP) and the idle spare ascend-07. "
        "Idempotent: existing objects are left untouched."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        created = demo_seed()
        if any(created.values()):
            self.stdout.write(
                self.style.SUCCESS(
                    "Demo inventory: created {profiles} profiles, {clusters} clusters, {nodes} nodes.".format(
                        **created
                    )
                )
            )
        else:
            self.stdout.write("Demo inventory already present; nothing changed.")

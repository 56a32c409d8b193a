from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.models import Cluster
from console.services.acceptance import acceptance_gate


class Command(BaseCommand):
    help = (
        "Run the correctness gate on a serving cluster now: the bundled samples (arithmetic, "
        "short facts, a Python snippet, a chat sanity check) through the head's chat API. "
        "Exit status 0 only when the gate passes. Audited; a failure raises an alert."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("cluster")
        parser.add_argument("--json", action="store_true", help="print the run as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = Cluster.objects.select_related("profile").get(
                name=options["cluster"]
            )
        except Cluster.DoesNotExist:
            raise CommandError(
                f"cluster {options['cluster']!r} does not exist; see python manage.py plan"
            ) from None
        try:
            result = acceptance_gate(cluster, trigger="manual")
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        run = result.run
        assert run is not None  # manual runs always ask
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "id": run.pk,
                        "cluster": cluster.name,
                        "passed": run.passed,
                        "accuracy": run.accuracy,
                        "reason": run.reason,
                        "samples": run.samples,
                    },
                    indent=2,
                    ensure_ascii=False,
                )
            )
        else:
            for s in run.samples:
                mark = "✓" if s["passed"] else "✗"
                why = "; ".join(s["problems"]) or (
                    "" if s["correct"] else "wrong answer"
                )
                answer = " ".join(s["answer"].split())[:70]
                self.stdout.write(f"{mark} {s['id']:<12} {answer!r} {why}")
            self.stdout.write(
                f"gate #{run.pk} {'PASSED' if run.passed else 'FAILED'}: {run.reason}"
            )
        if not run.passed:
            raise SystemExit(1)

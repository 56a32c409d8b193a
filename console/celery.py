"""The control side's Celery app (``celery -A console worker -Q control``).

Node agents are separate workers (``celery -A engine.agent worker -Q node.<name>``)
that import no Django; the control side reaches them by queue name only.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

CONTROL_QUEUE = "control"
# Task-name prefixes that run on a node agent; every other task runs on the control queue.
AGENT_TASK_PREFIXES = ("node.", "engine.", "sim.")


def node_queue(node_name: str) -> str:
    """Return the queue a node's agent consumes."""
    return f"node.{node_name}"


def route_task(
    name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **kw: Any
) -> dict[str, str]:
    """Route agent tasks to ``node.<name>`` from their ``node`` kwarg; everything else to control.

    An agent task without a node is a programming error: it would sit in a queue
    nobody consumes, so refuse it loudly.
    """
    if options.get("queue"):
        return {"queue": options["queue"]}
    if name.startswith(AGENT_TASK_PREFIXES):
        node = (kwargs or {}).get("node")
        if not node:
            raise ValueError(
                f"agent task {name!r} needs a node= keyword argument to pick its queue"
            )
        return {"queue": node_queue(node)}
    return {"queue": CONTROL_QUEUE}


@app.task(name="control.heartbeat", shared=False)
def heartbeat() -> str:
    """Beat's liveness tick for the control worker (seen in the worker log and in Flower)."""
    return "ok"

"""Talking to node agents: every call goes by task name to the node's own queue."""

from __future__ import annotations

from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeoutError

from console.celery import app, node_queue
from console.models import Node

DEFAULT_TIMEOUT = 30.0


class AgentUnreachable(Exception):
    """The node's agent did not answer in time (down, or its queue is not consumed)."""


def agent_call(
    node: Node | str, task: str, *, timeout: float = DEFAULT_TIMEOUT, **kwargs: Any
) -> Any:
    """Send an allowlisted task to a node's agent and wait for the JSON answer.

    Raises AgentUnreachable on timeout, and re-raises the agent's own error otherwise.
    """
    name = node if isinstance(node, str) else node.name
    queue = (
        node_queue(name)
        if isinstance(node, str)
        else (node.agent_queue or node_queue(name))
    )
    # expires: a task nobody picked up in time must not run later, out of order.
    result = app.send_task(
        task, kwargs={"node": name, **kwargs}, queue=queue, expires=timeout
    )
    try:
        return result.get(timeout=timeout, propagate=True, disable_sync_subtasks=False)
    except (TimeoutError, CeleryTimeoutError):
        raise AgentUnreachable(
            f"the agent of {name} did not answer {task} within {timeout:.0f}s (queue {queue})"
        ) from None
    finally:
        result.forget()

"""Talking to node agents: every call goes by task name to the node's own queue."""

from __future__ import annotations

import time
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeoutError
from celery.result import AsyncResult

from console.celery import app, node_queue
from console.models import Node

DEFAULT_TIMEOUT = 30.0


class AgentUnreachable(Exception):
    """The node's agent did not answer in time (down, or its queue is not consumed)."""


def result_wait(result: AsyncResult, timeout: float) -> Any:
    """A task's answer, read from its result key rather than the pub/sub channel.

    Celery's Redis result consumer can lose a message when several threads of one
    process wait at once (celery/celery#3761: the control worker runs operations and
    collect rounds side by side); the answer then looked like an agent that never
    replied. The key is there either way: poll it, 20 ms at first, 250 ms at most.
    Raises celery's TimeoutError at the deadline; re-raises the task's own error.
    """
    deadline = time.monotonic() + timeout
    pause = 0.02
    while not result.ready():
        left = deadline - time.monotonic()
        if left <= 0:
            raise CeleryTimeoutError(f"no result for {result.id} within {timeout:.0f}s")
        time.sleep(min(pause, left))
        pause = min(pause * 1.5, 0.25)
    # ready() cached the final state: get() answers from it without touching pub/sub.
    return result.get(timeout=1, propagate=True, disable_sync_subtasks=False)


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
        return result_wait(result, timeout)
    except (TimeoutError, CeleryTimeoutError):
        raise AgentUnreachable(
            f"the agent of {name} did not answer {task} within {timeout:.0f}s (queue {queue})"
        ) from None
    finally:
        result.forget()

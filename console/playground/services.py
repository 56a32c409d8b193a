"""Playground rules: which cluster may take a prompt; the validated chat request."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _

from console.models import Cluster, ClusterState, NodeRole
from console.selectors import cluster_critical_alerts

MAX_MESSAGES = 200
MAX_STOPS = 4


class PlaygroundRefused(Exception):
    """The prompt cannot be sent; ``field`` names the bad input (None: the state)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


@dataclass(frozen=True)
class Target:
    """Where a cluster's chat completions are served: the head node's OpenAI API."""

    cluster_id: int
    cluster_name: str
    model: str
    base_url: str


def state_notice(state: str) -> str | None:
    """The banner for a cluster that may not take prompts; None when it is Running."""
    notices: dict[str, str | None] = {
        ClusterState.RUNNING: None,
        ClusterState.DEGRADED: _(
            "The cluster is degraded; sending is disabled until it is Running again."
        ),
        ClusterState.STARTING: _(
            "The cluster is starting or restarting; sending waits until it is Running."
        ),
        ClusterState.DRAINING: _(
            "The cluster is draining for a restart or stop; sending is disabled."
        ),
        ClusterState.STOPPING: _("The cluster is stopping; sending is disabled."),
        ClusterState.STOPPED: _(
            "The cluster is stopped; start it from its page to use the playground."
        ),
        ClusterState.FAILED: _("The cluster has failed; see its page and operations."),
    }
    return notices.get(state, _("The cluster is not Running; sending is disabled."))


def cluster_notice(cluster: Cluster) -> str | None:
    """The banner for ``cluster``: its state's, else one for firing critical alerts."""
    notice = state_notice(cluster.state)
    if notice is not None:
        return notice
    firing = cluster_critical_alerts(cluster)
    if not firing:
        return None
    what = ", ".join(f"{rule} ({target})" for target, rule in firing)
    return _(
        "The cluster is degraded: critical alert firing: %(what)s. "
        "Sending is disabled until it is resolved."
    ) % {"what": what}


MAX_PK = 2**63 - 1  # a bigint primary key; beyond it the database itself errors


def cluster_pk(raw: Any) -> int | None:
    """A cluster id from a browser message (an integer or its digits), or None.

    Floats (1e400 is inf), booleans and numbers past a bigint are no id.
    """
    if isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) < 20:
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 < raw <= MAX_PK:
        return None
    return raw


def playground_target(*, cluster_id: Any) -> Target:
    """The head node's API of a Running cluster, or PlaygroundRefused saying why not."""
    pk = cluster_pk(cluster_id)
    if pk is None:
        raise PlaygroundRefused(
            _("cluster: pick a cluster from the list."), field="cluster"
        ) from None
    cluster = Cluster.objects.select_related("profile").filter(pk=pk).first()
    if cluster is None:
        raise PlaygroundRefused(
            _("cluster: no cluster with id %(id)s; reload the page.") % {"id": pk},
            field="cluster",
        )
    notice = cluster_notice(cluster)
    if notice is not None:
        raise PlaygroundRefused(f"{cluster.name}: {notice}")
    head = cluster.nodes.filter(role=NodeRole.HEAD, rank=0).first()
    if head is None or not head.api_port:
        raise PlaygroundRefused(
            _("%(name)s has no head node with an API port.") % {"name": cluster.name}
        )
    host = (
        f"[{head.management_ip}]" if ":" in head.management_ip else head.management_ip
    )
    return Target(
        cluster.pk,
        cluster.name,
        cluster.profile.served_model_name,
        f"http://{host}:{head.api_port}",
    )


def _number(raw: Any, field: str, low: float, high: float, default: float) -> float:
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or not low <= value <= high:
        raise PlaygroundRefused(
            _("%(field)s: give a number from %(low)s to %(high)s.")
            % {"field": field, "low": low, "high": high},
            field=field,
        )
    return value


def chat_request(*, model: str, data: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI chat-completions body for ``data`` (system, messages, sampling).

    Raises PlaygroundRefused naming the bad field.
    """
    messages = _messages(data)
    stops = _stops(data)
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": _number(data.get("temperature"), "temperature", 0.0, 2.0, 0.7),
        "top_p": _number(data.get("top_p"), "top_p", 0.0, 1.0, 1.0),
        "max_tokens": int(_number(data.get("max_tokens"), "max_tokens", 1, 32768, 512)),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if stops:
        body["stop"] = stops
    return body


def _messages(data: dict[str, Any]) -> list[dict[str, str]]:
    """The system prompt (when given) and the conversation, ending with the user's turn."""
    messages: list[dict[str, str]] = []
    system = data.get("system") or ""
    if not isinstance(system, str):
        raise PlaygroundRefused(
            _("system: give the system prompt as text."), field="system"
        )
    if system.strip():
        messages.append({"role": "system", "content": system})
    history = data.get("messages")
    if not isinstance(history, list) or not history or len(history) > MAX_MESSAGES:
        raise PlaygroundRefused(
            _("messages: give 1 to %(n)s turns, the last one from the user.")
            % {"n": MAX_MESSAGES},
            field="messages",
        )
    for turn in history:
        if (
            not isinstance(turn, dict)
            or turn.get("role") not in ("user", "assistant")
            or not isinstance(turn.get("content"), str)
        ):
            raise PlaygroundRefused(
                _("messages: each turn needs role user or assistant and text content."),
                field="messages",
            )
        messages.append({"role": turn["role"], "content": turn["content"]})
    if messages[-1]["role"] != "user" or not messages[-1]["content"].strip():
        raise PlaygroundRefused(
            _("messages: type a prompt; the last turn must be the user's."),
            field="messages",
        )
    return messages


def _stops(data: dict[str, Any]) -> list[str]:
    """The stop sequences: one string or a list of up to MAX_STOPS non-empty ones."""
    stops = data.get("stop") or []
    if isinstance(stops, str):
        stops = [stops]
    if (
        not isinstance(stops, list)
        or len(stops) > MAX_STOPS
        or not all(isinstance(s, str) and s for s in stops)
    ):
        raise PlaygroundRefused(
            _("stop: give up to %(n)s non-empty stop sequences, one per line.")
            % {"n": MAX_STOPS},
            field="stop",
        )
    return stops


def playground_clusters() -> list[dict[str, Any]]:
    """Every cluster for the picker, and whether it takes prompts (Running first)."""
    rows = []
    for c in Cluster.objects.select_related("profile").order_by("name"):
        rows.append(
            {
                "id": c.pk,
                "name": c.name,
                "model": c.profile.served_model_name if c.profile_id else "",
                "state": c.state,
                "label": str(c.get_state_display()),
                "notice": cluster_notice(c),
            }
        )
    rows.sort(key=lambda r: r["notice"] is not None)
    return rows

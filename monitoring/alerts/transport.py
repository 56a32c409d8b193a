"""What every notification transport shares: the base class, its error, one HTTP seam, and
the alert card (severity, target, value, link) the chat robots render in their own markup."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from monitoring.models import Alert, NotificationChannel


class TransportError(Exception):
    """A delivery that failed; ``permanent`` ones are not retried."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class Transport:
    """One kind of channel. ``send`` delivers one alert transition or raises TransportError;
    the caller (notify.notification_deliver) records the outcome."""

    def __init__(self, channel: NotificationChannel) -> None:
        self.channel = channel

    def send(self, alert: Alert, status: str) -> None:
        raise NotImplementedError


def fingerprint(alert: Alert) -> str:
    """Stable id of rule + target (Alertmanager groups and dedups on it)."""
    return hashlib.sha256(f"{alert.rule_id}:{alert.target}".encode()).hexdigest()[:16]


def console_url(alert: Alert) -> str:
    """The alert on the console's alerts page, or "" when CONSOLE_BASE_URL is unset."""
    base = getattr(settings, "CONSOLE_BASE_URL", "")
    return f"{base.rstrip('/')}/alerts/#alert-{alert.pk}" if base else ""


def redacted(url: str) -> str:
    """scheme://host[:port]/… for messages: robot URLs carry their key in the path or
    query, an Alertmanager URL may carry user:password before the host."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}/…"


def post_json(url: str, body: Any) -> httpx.Response:
    """POST ``body`` as JSON (one place to reach the network); HTTP ≥ 300 raises TransportError.

    4xx other than 429 will not get better by retrying (permanent). Messages never
    carry the URL's path or query (robot keys).
    """
    try:
        response = httpx.post(
            url,
            json=body,
            timeout=settings.ALERT_WEBHOOK_TIMEOUT_S,
        )
    except httpx.HTTPError as exc:
        raise TransportError(f"{type(exc).__name__} from {redacted(url)}") from exc
    if response.status_code >= 300:
        permanent = 400 <= response.status_code < 500 and response.status_code != 429
        raise TransportError(
            f"HTTP {response.status_code} from {redacted(url)}: {response.text[:200]}",
            permanent=permanent,
        )
    return response


def json_answer(response: httpx.Response) -> dict[str, Any]:
    """The robot's JSON answer (they answer 200 with an error code inside)."""
    try:
        data = response.json()
    except ValueError as exc:
        raise TransportError(f"not JSON: {response.text[:200]}") from exc
    if not isinstance(data, dict):
        raise TransportError(f"unexpected answer: {response.text[:200]}")
    return data


@dataclass(frozen=True)
class Card:
    """The facts every chat message shows, already translated (LANGUAGE_CODE in workers)."""

    resolved: bool
    title: str  # "[FIRING] HCCS link loss" / "[RESOLVED] …"
    severity: str
    target: str
    value: str
    summary: str
    since: str  # fired (or resolved) time, local
    link: str
    cluster: str

    def lines(self) -> list[tuple[str, str]]:
        """(label, value) rows in display order."""
        rows = [
            (_("Severity"), self.severity),
            (_("Target"), self.target),
            (_("Value"), self.value),
        ]
        if self.cluster:
            rows.append((_("Cluster"), self.cluster))
        rows.append((_("Resolved at") if self.resolved else _("Fired at"), self.since))
        return rows


def alert_card(alert: Alert, status: str) -> Card:
    """The card for one transition (``status`` is "firing" or "resolved")."""
    resolved = status == "resolved"
    when = (alert.resolved_at if resolved else alert.fired_at) or alert.pending_at
    value = "—" if alert.value is None else f"{alert.value:g}"
    threshold = alert.rule.threshold
    head = _("[RESOLVED]") if resolved else _("[FIRING]")
    return Card(
        resolved=resolved,
        title=f"{head} {alert.rule.name}",
        severity=str(alert.severity),
        target=alert.target,
        value=_("{value} (threshold {threshold:g})").format(
            value=value, threshold=threshold
        ),
        summary=alert.message,
        since=timezone.localtime(when).strftime("%Y-%m-%d %H:%M:%S %Z"),
        link=console_url(alert),
        cluster=alert.cluster.name if alert.cluster_id and alert.cluster else "",
    )

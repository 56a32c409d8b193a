"""Notification channels (webhook, email, chat robots, Alertmanager) and one row per delivery."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from monitoring.models.alerts import Alert, Severity


class ChannelKind(models.TextChoices):
    WEBHOOK = "webhook", _("Webhook")
    EMAIL = "email", _("Email")
    WECOM = "wecom", _("WeCom group robot")
    DINGTALK = "dingtalk", _("DingTalk robot")
    FEISHU = "feishu", _("Feishu / Lark bot")
    ALERTMANAGER = "alertmanager", _("Alertmanager (API v2)")


# Kinds whose URL carries the credential (WeCom ?key=, DingTalk ?access_token=, Feishu
# /hook/<token>): the URL is treated as a secret like ``secret`` itself.
URL_IS_SECRET = {ChannelKind.WECOM, ChannelKind.DINGTALK, ChannelKind.FEISHU}


class WebhookFormat(models.TextChoices):
    GENERIC = "generic", _("Generic JSON")
    ALERTMANAGER = "alertmanager", _("Alertmanager webhook")


class NotificationChannel(models.Model):
    """Where firing/resolved alerts go: a webhook URL (generic or Alertmanager JSON), email
    addresses, a WeCom / DingTalk / Feishu group robot, or the site's Alertmanager (API v2).

    ``secret`` (DingTalk's SEC… signing secret, Feishu's signature secret) and, for the
    robots, ``url`` hold credentials: write-only in the admin, never in audit rows.
    """

    name = models.CharField(_("name"), max_length=100, unique=True)
    kind = models.CharField(_("kind"), max_length=16, choices=ChannelKind.choices)
    url = models.URLField(
        _("URL"),
        max_length=500,
        blank=True,
        help_text=_(
            "Webhook: the receiver. Robots: the webhook address the group robot shows. "
            "Alertmanager: its base URL, e.g. http://alertmanager:9093."
        ),
    )
    secret = models.CharField(
        _("signing secret"),
        max_length=200,
        blank=True,
        help_text=_(
            "DingTalk: the SEC… secret of the robot's signed-request mode. Feishu: the "
            "signature-verification secret. Leave empty when the robot does not sign."
        ),
    )
    format = models.CharField(
        _("format"),
        max_length=12,
        choices=WebhookFormat.choices,
        default=WebhookFormat.GENERIC,
    )
    emails = models.CharField(
        _("email addresses"),
        max_length=500,
        blank=True,
        help_text=_("Comma-separated."),
    )
    min_severity = models.CharField(
        _("minimum severity"),
        max_length=10,
        choices=Severity.choices,
        default=Severity.WARNING,
    )
    send_resolved = models.BooleanField(_("send resolved"), default=True)
    enabled = models.BooleanField(_("enabled"), default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Each kind's required field, named with the fix."""
        if self.kind == ChannelKind.EMAIL:
            if not self.emails.strip():
                raise ValidationError(
                    {
                        "emails": _(
                            "Enter at least one address, e.g. oncall@example.com."
                        )
                    }
                )
        elif not self.url:
            raise ValidationError(
                {"url": _("Enter the URL this kind of channel posts to.")}
            )
        if self.secret and self.kind not in (ChannelKind.DINGTALK, ChannelKind.FEISHU):
            raise ValidationError(
                {"secret": _("Only DingTalk and Feishu robots sign; clear this field.")}
            )


class DeliveryState(models.TextChoices):
    PENDING = "pending", _("Pending")
    SENT = "sent", _("Sent")
    FAILED = "failed", _("Failed")


class Notification(models.Model):
    """One delivery of one alert transition ("firing"/"resolved") to one channel, with its retries."""

    channel = models.ForeignKey(
        NotificationChannel, on_delete=models.CASCADE, related_name="notifications"
    )
    alert = models.ForeignKey(
        Alert, on_delete=models.CASCADE, related_name="notifications"
    )
    status = models.CharField(max_length=10)  # the alert transition: firing | resolved
    state = models.CharField(
        max_length=8, choices=DeliveryState.choices, default=DeliveryState.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

"""Audit trail: one row per mutation, written by services through console.services.audit."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class AuditEvent(models.Model):
    """Who did what to which object, from where, when, and how it ended (modelled on NetBox ObjectChange)."""

    class Result(models.TextChoices):
        SUCCESS = "success", _("success")
        FAILURE = "failure", _("failure")
        DENIED = "denied", _("denied")

    created_at = models.DateTimeField(_("time"), auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_name = models.CharField(
        _("actor"),
        max_length=150,
        help_text=_("Copy of the username; survives user deletion."),
    )
    source_ip = models.GenericIPAddressField(_("source IP"), null=True, blank=True)
    request_id = models.CharField(_("request id"), max_length=64, blank=True)
    action = models.CharField(_("action"), max_length=80, db_index=True)
    target_type = models.CharField(_("target type"), max_length=80, blank=True)
    target_id = models.CharField(_("target id"), max_length=64, blank=True)
    target_repr = models.CharField(_("target"), max_length=200, blank=True)
    before = models.JSONField(_("before"), null=True, blank=True)
    after = models.JSONField(_("after"), null=True, blank=True)
    result = models.CharField(
        _("result"), max_length=16, choices=Result.choices, default=Result.SUCCESS
    )
    message = models.TextField(_("message"), blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("audit event")
        verbose_name_plural = _("audit events")

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.target_repr} ({self.result})"

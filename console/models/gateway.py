"""Inference gateway: API keys (stored hashed) and their usage per model."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from console.models.inventory import name_validator


class ApiKey(models.Model):
    """A key for the /v1 gateway: a visible prefix plus the sha256 of the whole secret;
    the secret itself is never stored."""

    name = models.CharField(
        _("name"), max_length=63, unique=True, validators=[name_validator]
    )
    prefix = models.CharField(
        _("prefix"),
        max_length=16,
        unique=True,
        help_text=_("First characters of the key, to recognise it."),
    )
    digest = models.CharField(_("sha256"), max_length=64, unique=True)
    rpm = models.PositiveIntegerField(
        _("requests per minute"), default=60, validators=[MinValueValidator(1)]
    )
    tpm = models.PositiveIntegerField(
        _("tokens per minute"), default=100_000, validators=[MinValueValidator(1)]
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("API key")
        verbose_name_plural = _("API keys")

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class ApiUsage(models.Model):
    """Counters of one key's gateway traffic to one model (flushed in batches by
    console.gateway.usage)."""

    key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="usage")
    model = models.CharField(_("model"), max_length=120)
    requests = models.PositiveBigIntegerField(_("requests"), default=0)
    prompt_tokens = models.PositiveBigIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.PositiveBigIntegerField(
        _("completion tokens"), default=0
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["key__name", "model"]
        constraints = [
            models.UniqueConstraint(
                fields=["key", "model"], name="one_usage_row_per_key_model"
            )
        ]
        verbose_name = _("API usage")
        verbose_name_plural = _("API usage")

    def __str__(self) -> str:
        return f"{self.key.name} / {self.model}"


class ApiKeyPolicy(models.Model):
    """What an operator may give themselves on the API keys page (one row, set by an
    admin): how many active keys, and at most which limits per key. Admins create
    keys for anyone without these bounds."""

    max_keys_per_operator = models.PositiveSmallIntegerField(
        _("active keys per operator"),
        default=3,
        help_text=_("0: operators cannot create keys; an admin makes them."),
    )
    max_rpm = models.PositiveIntegerField(
        _("requests per minute per key, at most"),
        default=60,
        validators=[MinValueValidator(1)],
    )
    max_tpm = models.PositiveIntegerField(
        _("tokens per minute per key, at most"),
        default=100_000,
        validators=[MinValueValidator(1)],
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("API key policy")
        verbose_name_plural = _("API key policy")

    def __str__(self) -> str:
        return f"{self.max_keys_per_operator} keys, ≤{self.max_rpm} rpm, ≤{self.max_tpm} tpm"

    @classmethod
    def current(cls) -> ApiKeyPolicy:
        return cls.objects.order_by("pk").first() or cls()

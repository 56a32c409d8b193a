from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _


def _create_role_groups(sender: Any, **kwargs: Any) -> None:
    # Late: console.permissions imports models, which need the app registry ready.
    from console.permissions import ensure_role_groups

    ensure_role_groups()


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = _("Ascend vLLM Ops Console")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        post_migrate.connect(_create_role_groups, sender=self)
        # Imported in ready(): these modules import models, which need the app registry.
        from console.signals import connect_signals

        connect_signals()
        # (ready(): the gateway hooks every database connection once the apps are loaded)
        from console.gateway import changes

        changes.install()  # writes to keys/clusters/nodes/profiles bump the gateway's cache

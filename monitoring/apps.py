from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MonitoringConfig(AppConfig):
    name = "monitoring"
    verbose_name = _("Monitoring")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at the top: receivers import models, which need the app registry.
        from monitoring import receivers

        receivers.connect()
        # Imported in ready(): receivers import models, which need the app registry.
        from console.signals import gate_finished
        from monitoring.alerts.gate import on_gate_finished

        gate_finished.connect(on_gate_finished, dispatch_uid="monitoring.gate_alert")
        # What rules and remediation write, in the reader's language (console renders it).
        from console.opsmessages import register, register_sentences
        from monitoring.opstext import MESSAGES, SENTENCES

        register(MESSAGES)
        register_sentences(SENTENCES)

"""Seed the "Gateway sees engine errors" rule on databases created before it existed."""

from django.db import migrations

RULE = {
    "metric": "engine.gateway_errors",
    "scope": "cluster",
    "comparison": "ge",
    "threshold": 3.0,
    "resolve_threshold": 1.0,
    "for_s": 0,
    "severity": "critical",
    "remediation_policy": "auto",
    "remediation_action": "restart",
}


def seed(apps, schema_editor):  # type: ignore[no-untyped-def]
    AlertRule = apps.get_model("monitoring", "AlertRule")
    AlertRule.objects.get_or_create(name="Gateway sees engine errors", defaults=RULE)


class Migration(migrations.Migration):
    dependencies = [("monitoring", "0003_incidents")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]

"""Seed the "Engine stalled" rule (issue 19) on databases created before it existed."""

from django.db import migrations

RULE = {
    "metric": "engine.stalled",
    "scope": "cluster",
    "comparison": "ge",
    "threshold": 1.0,
    "for_s": 30,
    "severity": "critical",
    "remediation_policy": "auto",
    "remediation_action": "restart",
}


def seed(apps, schema_editor):  # type: ignore[no-untyped-def]
    AlertRule = apps.get_model("monitoring", "AlertRule")
    AlertRule.objects.get_or_create(name="Engine stalled", defaults=RULE)


class Migration(migrations.Migration):
    dependencies = [("monitoring", "0006_incident_operation_fk")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]

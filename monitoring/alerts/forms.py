"""Forms of the alerts pages: rule edit (admin) and silence (operator). Errors are keyed by field and say the fix."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from monitoring.alerts.catalog import METRICS
from monitoring.models.alerts import AlertRule


class AlertRuleForm(forms.ModelForm):
    metric = forms.ChoiceField(label=_("metric"), choices=[])
    threshold = forms.FloatField(
        label=_("threshold"), error_messages={"invalid": _("Enter a number, e.g. 85.")}
    )
    resolve_threshold = forms.FloatField(
        label=_("resolve threshold"),
        required=False,
        error_messages={"invalid": _("Enter a number or leave empty.")},
    )

    class Meta:
        model = AlertRule
        fields = list(AlertRule.EDITABLE_FIELDS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["metric"].choices = [  # type: ignore[attr-defined]
            (k, f"{k} — {m.label}") for k, m in METRICS.items()
        ]

    def clean_labels(self) -> dict[str, str]:
        value = self.cleaned_data.get("labels") or {}
        if not isinstance(value, dict):
            raise forms.ValidationError(
                _('Labels must be a JSON object, e.g. {"team": "ops"}.')
            )
        return {str(k): str(v) for k, v in value.items()}

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        threshold, resolve, comparison = (
            data.get("threshold"),
            data.get("resolve_threshold"),
            data.get("comparison"),
        )
        if threshold is not None and resolve is not None:
            if comparison in ("gt", "ge") and resolve > threshold:
                self.add_error(
                    "resolve_threshold",
                    _(
                        "For a '>' rule the resolve threshold must be at most the threshold."
                    ),
                )
            if comparison in ("lt", "le") and resolve < threshold:
                self.add_error(
                    "resolve_threshold",
                    _(
                        "For a '<' rule the resolve threshold must be at least the threshold."
                    ),
                )
        return data


SILENCE_DURATIONS = [
    (1, _("1 hour")),
    (4, _("4 hours")),
    (24, _("1 day")),
    (168, _("1 week")),
]


class SilenceForm(forms.Form):
    hours = forms.TypedChoiceField(
        label=_("for"), choices=SILENCE_DURATIONS, coerce=int, initial=4
    )
    comment = forms.CharField(label=_("comment"), max_length=300, required=False)

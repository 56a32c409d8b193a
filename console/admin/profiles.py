"""The engine profile screen: its form picks the vllm-ascend version from the release
compatibility matrix (or an audited override) and the tuning options by key.

Separate from the cluster and node screens because the form carries its own rules
(the matrix, the override and its reason) that the inventory screens do not share.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from console.admin.audited import AuditedAdmin
from console.models import EngineProfile
from console.services.audit import audit_record
from engine import compat
from engine.tuning import TUNING_OPTIONS


class EngineProfileForm(forms.ModelForm):
    """The vllm-ascend version is picked from the release compatibility matrix
    (engine/vllm_ascend_releases.json); any other version is an override an admin
    types with a reason, audited as ``profile.version_override`` (issue 18)."""

    override_version = forms.CharField(
        label=_("Other vllm-ascend version (override)"),
        required=False,
        max_length=40,
        help_text=_(
            "Only for a build the matrix does not know (a site patch, a newer release): "
            "preflight then cannot check CANN, torch_npu and Triton-Ascend against it."
        ),
    )
    override_reason = forms.CharField(
        label=_("Reason for the override"),
        required=False,
        max_length=300,
        help_text=_("Required with an override; kept in the audit log."),
    )

    class Meta:
        model = EngineProfile
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        matrix = compat.source()
        choices = [("", "—")] + [(v, v) for v in compat.releases()]
        field = forms.ChoiceField(
            label=self.fields["vllm_ascend_version"].label,
            choices=choices,
            required=False,
            help_text=_(
                "Releases of vllm-ascend's compatibility matrix ({source} at {commit})."
            ).format(
                source=matrix.get("matrix", ""), commit=matrix.get("commit", "")[:12]
            ),
        )
        current = self.initial.get("vllm_ascend_version") or ""
        if current and compat.release(current) is None:
            self.initial["override_version"] = current  # a past override stays visible
            self.initial["vllm_ascend_version"] = ""
        self.fields["vllm_ascend_version"] = field
        self.fields["tuning"] = forms.MultipleChoiceField(
            label=self.fields["tuning"].label,
            required=False,
            widget=forms.CheckboxSelectMultiple,
            choices=[
                (o.key, f"{' '.join(o.argv())} — {o.reason} ({o.source})")
                for o in TUNING_OPTIONS
            ],
            help_text=_(
                "Each adds its vllm serve flags to the plan; the model check refuses one "
                "the profile's vLLM version lacks."
            ),
        )

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        other = (data.get("override_version") or "").strip()
        if not other:
            return data
        if compat.release(other) is not None:
            data["vllm_ascend_version"] = compat.normalize(other)
            data["override_version"] = ""
            return data  # a release after all: no override
        if not (data.get("override_reason") or "").strip():
            self.add_error(
                "override_reason",
                _("Say why {v} is used although the matrix does not know it.").format(
                    v=other
                ),
            )
        data["vllm_ascend_version"] = other
        self.instance.vllm_ascend_version = other
        return data


@admin.register(EngineProfile)
class EngineProfileAdmin(AuditedAdmin):
    form = EngineProfileForm

    def save_model(
        self, request: HttpRequest, obj: Model, form: Any, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        other = form.cleaned_data.get("override_version")
        if other:
            audit_record(
                action="profile.version_override",
                request=request,
                target=obj,
                after={
                    "vllm_ascend_version": other,
                    "reason": form.cleaned_data.get("override_reason", ""),
                    "matrix": compat.source().get("commit", ""),
                },
            )

    list_display = (
        "name",
        "served_model_name",
        "vllm_version",
        "data_parallel_size",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "quantization",
    )
    search_fields = ("name", "served_model_name", "model_path")

"""Admin screens for the inventory and for users/groups; every save and delete is audited."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, Permission, User
from django.db import router, transaction
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_post_parameters
from rest_framework.authtoken.admin import TokenAdmin as DRFTokenAdmin
from rest_framework.authtoken.models import TokenProxy

from console.models import AuditEvent, Cluster, EngineProfile, Node
from console.services.audit import audit_record, snapshot
from engine import compat
from engine.tuning import TUNING_OPTIONS

admin.site.site_header = _("Ascend vLLM Ops Console administration")
admin.site.site_title = _("Ascend vLLM Ops Console")

# Where save_model leaves the pre-save state for save_related (which writes the row
# once the many-to-many fields are saved too).
_BEFORE_ATTR = "_audit_before"


def _label(obj: Model) -> str:
    """A stable, language-independent name for a many-to-many member."""
    if isinstance(obj, Permission):
        return f"{obj.content_type.app_label}.{obj.codename}"
    return str(obj)


def audit_snapshot(
    obj: Model | None, *, secret_fields: tuple[str, ...] = ()
) -> dict[str, Any] | None:
    """snapshot() plus the object's id, many-to-many members by name, and no secrets."""
    data = snapshot(obj)
    if obj is None or data is None:
        return None
    for name in secret_fields:
        data.pop(name, None)  # a hash is still a secret: never in before/after
    for field in obj._meta.many_to_many:
        if field.name in data:
            if obj.pk is None:
                data[field.name] = []
                continue
            members = getattr(obj, field.name).all()
            if field.related_model is Permission:
                members = members.select_related("content_type")
            data[field.name] = sorted(_label(m) for m in members)
    return {"id": obj.pk, **data}


class AuditedAdmin(admin.ModelAdmin):
    """Writes an AuditEvent (with before/after) for every change made through the admin,
    including the objects of inline formsets."""

    # Fields whose value is never recorded; the row says "<field>_changed": true instead.
    audit_secret_fields: tuple[str, ...] = ()

    def audit_snapshot(self, obj: Model | None) -> dict[str, Any] | None:
        return audit_snapshot(obj, secret_fields=self.audit_secret_fields)

    def audit_secret_changes(self, old: Model | None, new: Model) -> dict[str, bool]:
        """{"<field>_changed": True} for each secret field whose value differs (not the values)."""
        return {
            f"{name}_changed": True
            for name in self.audit_secret_fields
            if getattr(new, name) != (getattr(old, name) if old is not None else "")
        }

    def save_model(
        self, request: HttpRequest, obj: Model, form: Any, change: bool
    ) -> None:
        old = (
            type(obj)._default_manager.filter(pk=obj.pk).first()
            if change and obj.pk
            else None
        )
        # Snapshot now: many-to-many members read later would already be the new ones.
        setattr(obj, _BEFORE_ATTR, (self.audit_snapshot(old), old))
        super().save_model(request, obj, form, change)

    def save_related(
        self, request: HttpRequest, form: Any, formsets: Any, change: bool
    ) -> None:
        # The parent's row is written after its many-to-many fields are saved (so
        # "after" is complete) and before its inlines' rows.
        super().save_related(request, form, [], change)
        obj = form.instance
        before, old = getattr(obj, _BEFORE_ATTR, (None, None))
        if hasattr(obj, _BEFORE_ATTR):
            delattr(obj, _BEFORE_ATTR)
        audit_record(
            action=f"{obj._meta.model_name}.{'update' if change else 'create'}",
            request=request,
            target=obj,
            before=before,
            after={
                **(self.audit_snapshot(obj) or {}),
                **self.audit_secret_changes(old, obj),
            },
        )
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    def save_formset(
        self, request: HttpRequest, form: Any, formset: Any, change: bool
    ) -> None:
        # Admin inlines are model formsets. Their forms hold the edited values
        # already, so "before" is read from the database (keyed by form instance:
        # a deleted object has lost its pk by the time its row is written).
        stored = formset.model._default_manager.in_bulk(
            [f.instance.pk for f in formset.initial_forms if f.instance.pk is not None]
        )
        before = {
            id(f.instance): audit_snapshot(stored.get(f.instance.pk))
            for f in formset.initial_forms
        }
        super().save_formset(request, form, formset, change)
        name = formset.model._meta.model_name
        for obj in formset.new_objects:
            audit_record(
                action=f"{name}.create",
                request=request,
                target=obj,
                after=audit_snapshot(obj),
            )
        for obj, _changed in formset.changed_objects:
            audit_record(
                action=f"{name}.update",
                request=request,
                target=obj,
                before=before.get(id(obj)),
                after=audit_snapshot(obj),
            )
        for obj in formset.deleted_objects:
            audit_record(
                action=f"{name}.delete",
                request=request,
                target=obj,
                target_repr=str(obj),
                before=before.get(id(obj)),
            )

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        before, label = self.audit_snapshot(obj), str(obj)
        super().delete_model(request, obj)
        audit_record(
            action=f"{obj._meta.model_name}.delete",
            request=request,
            target=obj,
            target_repr=label,
            before=before,
        )

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        with transaction.atomic(using=router.db_for_write(self.model)):
            for obj in queryset:
                self.delete_model(request, obj)


class NodeInline(admin.TabularInline):
    model = Node
    fields = ("name", "rank", "role", "management_ip", "api_port", "link_mode", "state")
    readonly_fields = ("state",)
    extra = 0
    show_change_link = True


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


@admin.register(Cluster)
class ClusterAdmin(AuditedAdmin):
    list_display = ("name", "profile", "state", "maintenance_mode")
    list_filter = ("state",)
    inlines = [NodeInline]


@admin.register(Node)
class NodeAdmin(AuditedAdmin):
    list_display = (
        "name",
        "cluster",
        "rank",
        "role",
        "management_ip",
        "api_port",
        "driver",
        "link_mode",
        "state",
    )
    list_filter = ("cluster", "role", "state", "link_mode", "driver")
    search_fields = ("name", "hostname", "management_ip")


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the audit trail is written by services, never edited."""

    list_display = (
        "created_at",
        "actor_name",
        "action",
        "target_repr",
        "result",
        "source_ip",
    )
    list_filter = ("result", "action")
    search_fields = ("actor_name", "action", "target_repr", "message")
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# Users and groups: the stock screens (where operators create users) write no audit
# row, so they are replaced by audited subclasses of the same screens.
admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class AuditedUserAdmin(AuditedAdmin, UserAdmin):
    """Django's user admin, audited; the password hash never reaches before/after."""

    audit_secret_fields = ("password",)

    def audit_snapshot(self, obj: Model | None) -> dict[str, Any] | None:
        data = super().audit_snapshot(obj)
        if data is not None and isinstance(obj, User):
            data["usable_password"] = obj.has_usable_password()
        return data

    @method_decorator(sensitive_post_parameters())
    def user_change_password(
        self, request: HttpRequest, id: str, form_url: str = ""
    ) -> HttpResponse:
        """The admin's set-password page, audited as user.password_change (no values)."""
        with transaction.atomic(using=router.db_for_write(self.model)):
            old = self.get_object(request, unquote(id))
            before = self.audit_snapshot(old)
            response = super().user_change_password(request, id, form_url)
            if old is None:  # the stock view answered 404
                return response
            new = User._default_manager.filter(pk=old.pk).first()
            # Only a saved change moves the hash; a rejected form leaves no row.
            if new is not None and new.password != old.password:
                audit_record(
                    action="user.password_change",
                    request=request,
                    target=new,
                    before=before,
                    after={
                        **(self.audit_snapshot(new) or {}),
                        **self.audit_secret_changes(old, new),
                    },
                )
            return response


@admin.register(Group)
class AuditedGroupAdmin(AuditedAdmin, GroupAdmin):
    """Django's group admin, audited (permissions recorded as app_label.codename)."""


# --- DRF tokens ---------------------------------------------------------------------
# rest_framework.authtoken's admin lists every token's key in plain text, and its model's
# str() *is* the key, so breadcrumbs, messages and the admin log would copy it too.
# TokenProxy exists only for that admin ("Proxy mapping pk to user pk for use in admin"),
# so it gets a str() without the key; the list shows a prefix; create and delete are audited
# like the API's token_rotate / token_revoke, and the key is shown once, when created.
TokenProxy.__str__ = lambda self: f"token of {self.user}"
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


@admin.register(TokenProxy)
class AuditedTokenAdmin(DRFTokenAdmin):
    """API tokens: a masked list, the key shown once at creation, every change audited."""

    list_display = ("masked_key", "user", "created")

    @admin.display(description=_("key"))
    def masked_key(self, obj: Any) -> str:
        return f"{obj.key[:4]}…"

    def save_model(
        self, request: HttpRequest, obj: Any, form: Any, change: bool
    ) -> None:
        replaced = change or type(obj)._default_manager.filter(user=obj.user).exists()
        super().save_model(request, obj, form, change)
        audit_record(
            action="token.rotate" if replaced else "token.create",
            request=request,
            target=obj.user,
            target_repr=f"token of {obj.user.username}",
        )
        if not change:
            messages.warning(
                request,
                _(
                    "The token of %(user)s is %(key)s. Copy it now: it is not shown again."
                )
                % {"user": obj.user.username, "key": obj.key},
            )

    # Django's admin log keys its rows by pk, and a token's pk is its key: the audit rows
    # above (keyed by the user) replace it.
    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> None:
        return None

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> None:
        return None

    def log_deletion(self, request: HttpRequest, obj: Any, object_repr: str) -> None:
        return None

    def log_deletions(self, request: HttpRequest, queryset: Any) -> None:
        return None

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        user = obj.user
        super().delete_model(request, obj)
        audit_record(
            action="token.revoke",
            request=request,
            target=user,
            target_repr=f"token of {user.username}",
        )

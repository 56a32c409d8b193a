"""AuditedAdmin, the base of every audited admin screen, and the snapshot it records.

Separate from the screens themselves: console's inventory and account screens and
monitoring's admin all subclass it, so it holds only the audit mechanics (before/after
snapshots, secret fields, inline formsets, deletes).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.models import Permission
from django.db import router, transaction
from django.db.models import Model
from django.http import HttpRequest

from console.services.audit import audit_record, snapshot

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

"""``{% admin_names as names %}``: who can grant roles and keys (for hints on dead ends)."""

from __future__ import annotations

from django import template

from console.views.errors import admins

register = template.Library()


@register.simple_tag
def admin_names() -> str:
    return ", ".join(admins())

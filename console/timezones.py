"""Times in the user's time zone, on every page and in every script.

The browser tells the console its IANA zone in the ``console_tz`` cookie (base.js sets it
from ``Intl.DateTimeFormat``); this middleware activates that zone for the request, so
server-rendered times and the scripts (which read the active zone from ``<html
data-tz>``) show the same clock. Unknown or missing zones fall back to ``TIME_ZONE``.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

COOKIE = "console_tz"


def zone_from(name: str) -> zoneinfo.ZoneInfo | None:
    """The zone called ``name`` or None when it is not a valid IANA name."""
    if not name or len(name) > 64:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None


class UserTimezoneMiddleware:
    """Activate the zone from the ``console_tz`` cookie for this request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = zone_from(request.COOKIES.get(COOKIE, ""))
        if zone is not None:
            timezone.activate(zone)
        else:
            timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()

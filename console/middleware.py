"""Request-wide rules: every page needs a login except the public paths; every request gets an id."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse

# Paths reachable without a session: liveness, login, static files. API and gateway
# paths do their own (token) authentication and answer 401/403 instead of redirecting.
PUBLIC_PREFIXES = ("/healthz", "/accounts/login/", "/static/", "/i18n/", "/jsi18n/")
SELF_AUTHENTICATING_PREFIXES = ("/api/", "/v1/", "/metrics")


class LoginRequiredMiddleware:
    """Redirect anonymous browsers to the login page for everything but the public paths."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.request_id = request.headers.get("X-Request-ID") or uuid.uuid4().hex  # type: ignore[attr-defined]
        path = request.path_info
        if (
            not request.user.is_authenticated
            and not path.startswith(PUBLIC_PREFIXES)
            and not path.startswith(SELF_AUTHENTICATING_PREFIXES)
        ):
            return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
        response = self.get_response(request)
        response["X-Request-ID"] = request.request_id  # type: ignore[attr-defined]
        return response

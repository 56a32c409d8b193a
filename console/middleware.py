"""Request-wide rules: every page needs a login except the public paths; every request gets an id."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

# Paths reachable without a session: liveness, login, static files. API and gateway
# paths do their own (token) authentication and answer 401/403 instead of redirecting.
PUBLIC_PREFIXES = ("/healthz", "/accounts/login/", "/static/", "/i18n/", "/jsi18n/")
SELF_AUTHENTICATING_PREFIXES = ("/api/", "/v1/", "/metrics")


# what a caller's X-Request-ID may be (it is logged and stored in a 64-character column)
REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,64}\Z")


def request_id_from(request: HttpRequest) -> str:
    """The caller's X-Request-ID when it is a short plain token, else a fresh one."""
    given = request.headers.get("X-Request-ID") or ""
    return given if REQUEST_ID_RE.match(given) else uuid.uuid4().hex


class LoginRequiredMiddleware:
    """Redirect anonymous browsers to the login page for everything but the public paths."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.request_id = request_id_from(request)  # type: ignore[attr-defined]
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


def _nul_path(value: object, path: str = "") -> str | None:
    """Where in a parsed JSON document a NUL character sits ("matchers.key", "name"), or None."""
    if isinstance(value, str):
        return path or "body" if "\x00" in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{path}.{k}" if path else str(k)
            if "\x00" in str(k):
                return here.replace("\x00", "\\u0000")
            found = _nul_path(v, here)
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _nul_path(v, f"{path}[{i}]")
            if found:
                return found
    return None


class RejectNulMiddleware:
    """Input with a NUL character (API, page query strings and forms) is refused with 400
    naming the field.

    PostgreSQL text cannot hold NUL: without this, a stray ``\\u0000`` in a filter or a
    body field would be a database error (500) instead of a clear answer.
    """

    MESSAGE = "contains a NUL character (\\u0000); remove it"

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        # /v1/ answers in the gateway's own error format; /static/ has no input
        if not path.startswith(("/v1/", "/static/")):
            field = self._field(request)
            if field is not None:
                if path.startswith("/api/"):
                    return JsonResponse({field: [self.MESSAGE]}, status=400)
                # pages (their query strings and forms): PostgreSQL text cannot hold NUL
                return HttpResponseBadRequest(
                    f"{field} {self.MESSAGE}", content_type="text/plain; charset=utf-8"
                )
        return self.get_response(request)

    @staticmethod
    def _field(request: HttpRequest) -> str | None:
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in v for v in values):
                return key.replace("\x00", "\\u0000") or "query"
        if request.method not in ("POST", "PUT", "PATCH"):
            return None
        body = request.body
        if b"\\u0000" not in body and b"\x00" not in body and b"%00" not in body:
            return None
        if request.content_type == "application/json":
            try:
                return _nul_path(json.loads(body)) or None
            except (ValueError, RecursionError):
                return None  # malformed JSON: the view's parser answers 400 for it
        if request.content_type in (
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        ):
            for key, values in request.POST.lists():
                if "\x00" in key or any("\x00" in v for v in values):
                    return key.replace("\x00", "\\u0000") or "body"
        return None

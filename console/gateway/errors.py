"""Errors in each protocol's own shape: OpenAI ``{"error": {...}}``, Anthropic
``{"type": "error", "error": {...}}``."""

from __future__ import annotations

from console.gateway.http import Response, json_response

OPENAI = "openai"
ANTHROPIC = "anthropic"

_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    502: "api_error",
    503: "service_unavailable",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    502: "api_error",
    503: "overloaded_error",
}


class GatewayError(Exception):
    """A request the gateway answers itself: HTTP status, message, the offending param,
    optional Retry-After."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.retry_after = retry_after


def error_response(err: GatewayError, protocol: str) -> Response:
    """The error as the client's SDK expects it, with Retry-After when the error has
    one."""
    if protocol == ANTHROPIC:
        body: dict[str, object] = {
            "type": "error",
            "error": {
                "type": _ANTHROPIC_TYPES.get(err.status, "api_error"),
                "message": err.message,
            },
        }
    else:
        body = {
            "error": {
                "message": err.message,
                "type": _OPENAI_TYPES.get(err.status, "api_error"),
                "param": err.param,
                "code": err.status,
            }
        }
    headers = {} if err.retry_after is None else {"Retry-After": str(err.retry_after)}
    return json_response(body, err.status, headers)

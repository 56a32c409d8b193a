"""What every route of the head's HTTP API shares: the process state the app carries
(``request.app[STATE]``), :class:`ApiError` and its OpenAI and Anthropic shapes.

OpenAI errors are ``{"error": {"message", "type", "param", "code"}}``, Anthropic ones
``{"type": "error", "error": {"type", "message"}}`` (reference/vllm-facts.md §2).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from engine.sim.vllm.cli import ServeArgs
from engine.sim.vllm.runtime import SimEngine

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class ServerState:
    """What the routes need to know about the process."""

    args: ServeArgs
    engine: SimEngine
    healthy: Callable[[], bool]  # all ranks joined, loaded, none dead


# where build_app keeps the ServerState; handlers read it as request.app[STATE]
STATE = web.AppKey("state", ServerState)


class ApiError(Exception):
    """An error answer: HTTP status, message, the offending param."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


_OPENAI_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    503: "ServiceUnavailableError",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    503: "overloaded_error",
}


def openai_error(err: ApiError) -> web.Response:
    body = {
        "error": {
            "message": err.message,
            "type": _OPENAI_TYPES.get(err.status, "InternalServerError"),
            "param": err.param,
            "code": err.status,
        }
    }
    return web.json_response(body, status=err.status)


def anthropic_error(err: ApiError) -> web.Response:
    body = {
        "type": "error",
        "error": {
            "type": _ANTHROPIC_TYPES.get(err.status, "api_error"),
            "message": err.message,
        },
    }
    return web.json_response(body, status=err.status)


def _answering_errors(
    render: Callable[[ApiError], web.Response],
) -> Callable[[Handler], Handler]:
    """A decorator that turns an ApiError the handler raises into ``render(err)``."""

    def decorate(fn: Handler) -> Handler:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            try:
                return await fn(request)
            except ApiError as err:
                return render(err)

        return wrapped

    return decorate


# the error shape of an OpenAI route (and of /tokenize, /detokenize)
openai_route = _answering_errors(openai_error)
# the error shape of an Anthropic route
anthropic_route = _answering_errors(anthropic_error)

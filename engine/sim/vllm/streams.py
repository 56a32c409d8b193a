"""From a checked request to the client: queue it on the engine, await its tokens,
answer with the whole result or with server-sent events; a client that leaves
aborts its request (counted as finished_reason="abort", as vLLM does).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from engine.sim.vllm import answers, text
from engine.sim.vllm.api import ApiError, ServerState
from engine.sim.vllm.parse import budget, stops
from engine.sim.vllm.runtime import Stream


def submit(
    state: ServerState,
    prefix: str,
    prompt_toks: list[str],
    body: dict[str, Any],
    max_tokens: int | None,
    stop_field: str,
) -> Stream:
    """Check the token budget and the stop strings (field ``stop_field``), then queue
    the request as ``<prefix>-<hex>``; raises ApiError (400, or 503 while the engine
    is not ready)."""
    max_tokens = budget(state, len(prompt_toks), max_tokens, "max_tokens")
    stop = stops(body, stop_field)
    if not state.healthy():
        raise ApiError(
            503,
            "The engine is not ready: waiting for ranks to join or for the model to "
            "load.",
        )
    seed = text.seed_of(" ".join(prompt_toks))
    if (
        state.engine.links.garbled
    ):  # a rank with the garbled fault corrupts every answer
        completion = answers.garbled(seed, max_tokens)
    else:
        completion = answers.answer(
            text.join(prompt_toks), max_tokens
        ) or text.generate(
            seed, max_tokens, stop=stop, ignore_eos=bool(body.get("ignore_eos"))
        )
    ids = [text.token_id(t) for t in prompt_toks]
    return state.engine.submit(
        f"{prefix}-{uuid.uuid4().hex}", ids, completion, max_tokens=max_tokens
    )


def _closed(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


async def tokens(
    request: web.Request, state: ServerState, stream: Stream
) -> AsyncIterator[int]:
    """Yield token indexes as the engine emits them; abort if the client leaves."""
    while True:
        try:
            item = await asyncio.wait_for(stream.queue.get(), 0.25)
        except TimeoutError:
            if _closed(request):
                state.engine.abort(stream.request_id)
                raise ConnectionResetError("client disconnected") from None
            continue
        if item is None:
            if stream.shutdown:
                raise ConnectionResetError("engine shutting down")
            return
        yield item


async def events(
    request: web.Request, state: ServerState, stream: Stream
) -> AsyncIterator[list[int]]:
    """The token indexes of each streamed event, as vLLM's output processor groups
    them with ``--stream-interval N``: the first token at once, then every N tokens,
    and whatever is left when the request finishes (vllm/v1/engine/output_processor.py,
    RequestState.make_request_output: "Send output request only when 1. It has
    finished, or 2. It is the first token, or 3. It has reached the stream interval
    number of tokens"). N = 1 (the default): one event per token."""
    interval, pending, sent = state.args.stream_interval, [], False
    async for i in tokens(request, state, stream):
        pending.append(i)
        if not sent or len(pending) >= interval or i == stream.output_len - 1:
            yield pending
            pending, sent = [], True
    if pending:
        yield pending


async def whole(
    request: web.Request, state: ServerState, stream: Stream, answer: dict[str, Any]
) -> web.Response:
    """Wait for the last token, then answer ``answer`` as JSON; 499 if the client
    left first."""
    try:
        async for _ in tokens(request, state, stream):
            pass
    except ConnectionResetError:
        return web.Response(status=499)
    return web.json_response(answer)


async def send_events(
    request: web.Request,
    state: ServerState,
    stream: Stream,
    frames: AsyncIterator[bytes],
) -> web.StreamResponse:
    """Send ``frames`` as server-sent events; a client that leaves aborts the request."""
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await resp.prepare(request)
    try:
        async for frame in frames:
            await resp.write(frame)
    except (ConnectionResetError, ConnectionError):
        state.engine.abort(stream.request_id)
    return resp

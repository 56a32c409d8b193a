"""Reading and checking request bodies: JSON, model, chat prompt, sampling, budget.

Each check raises :class:`~engine.sim.vllm.api.ApiError` with vLLM's message and the
offending param; the route's wrapper words it as OpenAI or Anthropic.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from engine.sim.vllm import text
from engine.sim.vllm.api import ApiError, ServerState


async def json_body(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object; raises ApiError (400) for anything else."""
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return body


def check_model(state: ServerState, body: dict[str, Any]) -> None:
    """Raise ApiError (404) unless ``model`` is absent or names the served model."""
    model = body.get("model")
    if model is not None and model not in (state.args.model_name, state.args.model):
        raise ApiError(404, f"The model `{model}` does not exist.", "model")


def content_text(content: Any, field: str) -> str:
    """A message's text: a string, or the text blocks of a list joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if (
                isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ):
                parts.append(block["text"])
        return "\n".join(parts)
    if content is None:
        return ""
    raise ApiError(400, f"{field} must be a string or a list of text blocks.", field)


def chat_prompt(messages: Any, system: str | None = None) -> list[str]:
    """Prompt tokens of a chat (Qwen chat template: <|im_start|>role … <|im_end|>)."""
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list.", "messages")
    toks: list[str] = []
    turns = ([{"role": "system", "content": system}] if system else []) + messages
    for i, msg in enumerate(turns):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise ApiError(400, f"messages[{i}] needs a role and content.", "messages")
        toks += [
            "<|im_start|>",
            msg["role"],
            *text.split(content_text(msg.get("content"), "messages")),
            "<|im_end|>",
        ]
    return toks + ["<|im_start|>", "assistant"]


def int_param(body: dict[str, Any], name: str, default: int | None) -> int | None:
    """A non-negative integer field (``default`` if absent or null)."""
    v = body.get(name, default)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ApiError(400, f"{name} must be a non-negative integer.", name)
    return v


def stops(body: dict[str, Any], name: str) -> list[str]:
    """The stop strings of field ``name``: one string or a list of them."""
    v = body.get(name)
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and all(isinstance(s, str) for s in v):
        return list(v)
    raise ApiError(400, f"{name} must be a string or a list of strings.", name)


def check_sampling(body: dict[str, Any]) -> None:
    """Raise ApiError (400) for temperature or top_p out of range, or n other than 1."""
    for name, lo, hi in (("temperature", 0.0, 2.0), ("top_p", 0.0, 1.0)):
        v = body.get(name)
        if v is not None and (
            not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi
        ):
            raise ApiError(
                400, f"{name} must be between {lo} and {hi}, got {v!r}.", name
            )
    n = body.get("n", 1)
    if n != 1:
        raise ApiError(400, "Only n=1 is supported by this server.", "n")


def budget(
    state: ServerState, prompt_len: int, max_tokens: int | None, field: str
) -> int:
    """The tokens to generate (all the context leaves when None); raises ApiError
    (400) when prompt and completion exceed ``--max-model-len``."""
    limit = state.args.max_model_len
    if max_tokens is None:
        max_tokens = max(limit - prompt_len, 0)
    if prompt_len + max_tokens > limit:
        raise ApiError(
            400,
            f"This model's maximum context length is {limit} tokens. However, you "
            "requested "
            f"{prompt_len + max_tokens} tokens ({prompt_len} in the messages, "
            f"{max_tokens} in the "
            "completion). Please reduce the length of the messages or completion.",
            field,
        )
    return max_tokens

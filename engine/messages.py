"""The allowlist of every field of every task message an agent accepts.

The broker is the agent's trust boundary: whatever reaches ``node.<name>`` is read as
hostile until it passes here. Each task's arguments are checked by type, range and
form before the task body runs; anything unexpected raises :class:`MessageRefused`
(a ValueError) naming the field, and nothing is done. Pure Python, no Django, no Celery.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable
from typing import Any

# the roles a NodePlan carries (engine.plans.build_plan): rank 0 serves, the rest run --headless
PLAN_ROLES = frozenset({"head", "headless"})
PLAN_KEYS = frozenset({"name", "rank", "role", "argv", "env"})
NODE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
MAX_ARGV = 512
MAX_WORD = 8192
MAX_ENV = 256
MAX_RANK = 4095
MAX_PATH = 4096
MAX_LIST = 256
MAX_ECHO_CHARS = 65536


class MessageRefused(ValueError):
    """A task message field is not allowed; the message says which and why."""


def has_control(text: str) -> bool:
    """True when ``text`` holds a C0 control character (newline and tab included) or DEL."""
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)


def _text(
    field: str, value: Any, *, max_len: int = MAX_WORD, empty: bool = False
) -> str:
    if not isinstance(value, str):
        raise MessageRefused(f"{field} must be a string, got {type(value).__name__}")
    if not value and not empty:
        raise MessageRefused(f"{field} must not be empty")
    if len(value) > max_len:
        raise MessageRefused(f"{field} is {len(value)} characters; at most {max_len}")
    if has_control(value):
        raise MessageRefused(f"{field} contains a control character")
    return value


def _int(field: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MessageRefused(f"{field} must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise MessageRefused(f"{field} is {value}; it must be {low}..{high}")
    return value


def _number(field: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MessageRefused(f"{field} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or not low <= value <= high:
        raise MessageRefused(f"{field} is {value}; it must be {low}..{high}")
    return float(value)


def _list(field: str, value: Any, max_len: int = MAX_LIST) -> list[Any]:
    if not isinstance(value, list):
        raise MessageRefused(f"{field} must be a list, got {type(value).__name__}")
    if len(value) > max_len:
        raise MessageRefused(f"{field} has {len(value)} items; at most {max_len}")
    return value


def _path(field: str, value: Any) -> str:
    # may be empty (a node in no cluster); engine.preflight confines it to the models root
    return _text(field, value, max_len=MAX_PATH, empty=True)


def _ip(field: str, value: Any) -> str:
    text = _text(field, value, max_len=64)
    try:
        ipaddress.ip_address(text)
    except ValueError:
        raise MessageRefused(f"{field} {text!r} is not an IP address") from None
    return text


def check_node(value: Any) -> str:
    """The ``node`` every task names: a node name, never anything a path or unit could misread."""
    name = _text("node", value, max_len=63)
    if not NODE_NAME_RE.match(name):
        raise MessageRefused(f"node {name!r} is not a node name")
    return name


def check_plan(plan: Any) -> dict[str, Any]:
    """``engine.start``'s plan: NodePlan.to_dict() keys only, each of its type and form.

    ``role`` is one of PLAN_ROLES (it is written into the systemd unit); argv words and
    env values carry no control character (they end up in a unit, an env file, a shell).
    """
    if not isinstance(plan, dict):
        raise MessageRefused(f"plan must be an object, got {type(plan).__name__}")
    unknown = sorted(str(k) for k in plan if k not in PLAN_KEYS)
    if unknown:
        raise MessageRefused(f"plan has unknown keys: {', '.join(unknown)}")
    if "name" in plan:
        check_node(plan["name"])
    if "rank" in plan:
        _int("plan.rank", plan["rank"], 0, MAX_RANK)
    role = plan.get("role", "head")
    if role not in PLAN_ROLES:
        raise MessageRefused(
            f"plan.role {str(role)[:40]!r} is unknown; use one of {', '.join(sorted(PLAN_ROLES))}"
        )
    argv = _list("plan.argv", plan.get("argv"), MAX_ARGV)
    for i, word in enumerate(argv):
        _text(f"plan.argv[{i}]", word, empty=True)
    env = plan.get("env") or {}
    if not isinstance(env, dict) or len(env) > MAX_ENV:
        raise MessageRefused(f"plan.env must be an object of at most {MAX_ENV} names")
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_NAME_RE.match(key):
            raise MessageRefused(
                f"plan.env name {str(key)[:40]!r} is not a variable name"
            )
        _text(f"plan.env[{key}]", value, empty=True)
    return plan


def _echo_payload(value: Any) -> Any:
    if not isinstance(value, dict):
        raise MessageRefused(f"payload must be an object, got {type(value).__name__}")
    if len(repr(value)) > MAX_ECHO_CHARS:
        raise MessageRefused(f"payload is larger than {MAX_ECHO_CHARS} characters")
    return value


def _optional(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    return lambda field, value: None if value is None else check(field, value)


def _flag(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise MessageRefused(f"{field} must be true or false")
    return value


def _ports(field: str, value: Any) -> list[int]:
    return [
        _int(f"{field}[{i}]", p, 1, 65535) for i, p in enumerate(_list(field, value))
    ]


def _ips(field: str, value: Any) -> list[str]:
    return [_ip(f"{field}[{i}]", t) for i, t in enumerate(_list(field, value))]


# vllm bench serve's --goodput names (vllm/benchmarks/serve.py check_goodput_args)
GOODPUT_NAMES = ("ttft", "tpot", "e2el")
BENCH_MAX_LEN = 131072
BENCH_MAX_PROMPTS = 100_000
BENCH_MAX_CONCURRENCY = 4096
BENCH_SHAPE_KEYS = frozenset(
    {
        "input_len",
        "output_len",
        "num_prompts",
        "max_concurrency",
        "request_rate",
        "burstiness",
        "goodput",
        "label",
        "seed",
    }
)
BENCH_LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


GATEWAY_URL_RE = re.compile(
    r"^https?://[A-Za-z0-9.\-]+(?::\d{1,5})?/?\Z|^https?://\[[0-9A-Fa-f:]+\](?::\d{1,5})?/?\Z"
)
GATEWAY_KEY_RE = re.compile(r"^[A-Za-z0-9_\-]{16,200}\Z")


def check_bench_gateway(value: Any) -> dict[str, str] | None:
    """``node.bench_serve``'s optional gateway: the console's base URL (scheme, host,
    port; no path, user or query) and a key the console made for this run only."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"url", "key"}:
        raise MessageRefused("gateway must be an object with url and key")
    url = _text("gateway.url", value["url"], max_len=300)
    if not GATEWAY_URL_RE.match(url):
        raise MessageRefused("gateway.url must be http(s)://host[:port], nothing else")
    key = _text("gateway.key", value["key"], max_len=200)
    if not GATEWAY_KEY_RE.match(key):
        raise MessageRefused("gateway.key is not a gateway key")
    return value


def check_bench_shape(shape: Any) -> dict[str, Any]:
    """``node.bench_serve``'s workload of one sweep point (engine/bench_serve.py): lengths,
    prompts, concurrency, rate, burstiness, goodput SLOs, label, seed; nothing else."""
    if not isinstance(shape, dict):
        raise MessageRefused(f"shape must be an object, got {type(shape).__name__}")
    unknown = sorted(str(k) for k in shape if k not in BENCH_SHAPE_KEYS)
    if unknown:
        raise MessageRefused(f"shape has unknown keys: {', '.join(unknown)}")
    for key, high in (
        ("input_len", BENCH_MAX_LEN),
        ("output_len", BENCH_MAX_LEN),
        ("num_prompts", BENCH_MAX_PROMPTS),
    ):
        if shape.get(key) is None:
            raise MessageRefused(f"shape.{key} is required")
        _int(f"shape.{key}", shape[key], 1, high)
    if shape.get("max_concurrency") is not None:
        _int(
            "shape.max_concurrency", shape["max_concurrency"], 1, BENCH_MAX_CONCURRENCY
        )
    if shape.get("seed") is not None:
        _int("shape.seed", shape["seed"], 0, 2**31 - 1)
    # absent request_rate: inf (every request at time 0), as in vLLM
    if shape.get("request_rate") is not None:
        _number("shape.request_rate", shape["request_rate"], 1e-3, 1e6)
    if shape.get("burstiness") is not None:
        _number("shape.burstiness", shape["burstiness"], 1e-3, 100.0)
    goodput = shape.get("goodput") or {}
    if not isinstance(goodput, dict):
        raise MessageRefused("shape.goodput must be an object of name: milliseconds")
    for name, ms in goodput.items():
        if name not in GOODPUT_NAMES:
            raise MessageRefused(
                f"shape.goodput {str(name)[:20]!r}: use {', '.join(GOODPUT_NAMES)}"
            )
        _number(f"shape.goodput.{name}", ms, 0.0, 3_600_000.0)
    label = shape.get("label")
    if label is not None and (
        not isinstance(label, str) or not BENCH_LABEL_RE.match(label)
    ):
        raise MessageRefused("shape.label: letters, digits, . _ - (at most 64)")
    return shape


# task name -> {argument: check(field, value)}; "node" is checked for every task.
FIELD_CHECKS: dict[str, dict[str, Callable[[str, Any], Any]]] = {
    "node.heartbeat": {},
    "node.echo": {"payload": lambda f, v: _echo_payload(v)},
    "node.collect": {
        "model_path": _optional(_path),
        "detect_server_model": lambda f, v: _flag(f, v),
    },
    "node.preflight": {
        "expected_npus": lambda f, v: _int(f, v, 0, 64),
        "host_ip": _ip,
        "ports": _ports,
        "model_path": _path,
        "ping_targets": _ips,
        "vllm_ascend_version": lambda f, v: _text(f, v, max_len=40, empty=True),
    },
    "node.weights_sha256": {"model_path": _path},
    "node.bench_serve": {
        "shape": lambda f, v: check_bench_shape(v),
        "gateway": lambda f, v: check_bench_gateway(v),
    },
    "node.bench_stop": {},
    "engine.start": {"plan": lambda f, v: check_plan(v)},
    "engine.stop": {"grace_s": lambda f, v: _number(f, v, 0.0, 3600.0)},
    "engine.status": {},
    "engine.logs": {"lines": lambda f, v: _int(f, v, 1, 5000)},
    "sim.inject": {
        "fault": lambda f, v: _text(f, v, max_len=40),
        "value": _optional(lambda f, v: _text(f, v, max_len=40)),
    },
    "node.evidence": {
        "log_lines": lambda f, v: _int(f, v, 1, 5000)
    },  # engine.evidence MAX_LOG_LINES
    "sim.clear": {},
    "sim.state": {},
}


def check_message(task: str, arguments: dict[str, Any]) -> None:
    """Refuse a task message whose arguments are not each on the task's allowlist.

    ``arguments`` maps parameter names to values as bound to the task's signature
    (defaults left out are fine). Raises MessageRefused naming the first bad field.
    """
    checks = FIELD_CHECKS.get(task)
    if checks is None:
        raise MessageRefused(f"task {task!r} has no message checks; it is not allowed")
    for name, value in arguments.items():
        if name == "node":
            check_node(value)
        elif name in checks:
            checks[name](name, value)
        else:
            raise MessageRefused(f"{task}: argument {name!r} is not allowed")

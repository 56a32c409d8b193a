"""What a benchmark run asks for: the sweep an operator requests, checked and turned
into the workload shapes the head's ``vllm bench serve`` runs one after another.

A request names vLLM's own knobs (``vllm bench serve``: ``--random-input-len``,
``--random-output-len``, ``--num-prompts``, ``--max-concurrency``, ``--request-rate``,
``--burstiness``, ``--goodput ttft:MS tpot:MS e2el:MS``, ``--label``, ``--seed``) and
sweeps either concurrency or request rate. Bad input raises :class:`BenchRequestInvalid`
naming the field; the operation is then never created.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _

from engine.messages import (
    BENCH_LABEL_RE,
    BENCH_MAX_CONCURRENCY,
    BENCH_MAX_LEN,
    BENCH_MAX_PROMPTS,
    GOODPUT_NAMES,
)

MAX_POINTS = 16
TARGETS = ("head", "gateway")


class BenchRequestInvalid(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _numbers(field: str, raw: Any, kind: type, low: float, high: float) -> list[Any]:
    if raw in (None, "", []):
        return []
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple):
        items = [items]
    out = []
    for item in items:
        try:
            value = kind(str(item).strip()) if isinstance(item, str) else item
        except ValueError:
            raise BenchRequestInvalid(
                field, _("{item!r} is not a number; e.g. 1,8,32").format(item=item)
            ) from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BenchRequestInvalid(
                field, _("{item!r} is not a number; e.g. 1,8,32").format(item=item)
            )
        if kind is int and value != int(value):
            raise BenchRequestInvalid(
                field, _("{item!r} is not a whole number").format(item=item)
            )
        if not math.isfinite(value) or not low <= value <= high:
            raise BenchRequestInvalid(
                field,
                _("{item!r} must be {low:g}..{high:g}").format(
                    item=item, low=low, high=high
                ),
            )
        out.append(kind(value))
    if len(out) > MAX_POINTS:
        raise BenchRequestInvalid(
            field, _("at most {n} points in one sweep").format(n=MAX_POINTS)
        )
    return out


def _one(field: str, raw: Any, kind: type, low: float, high: float) -> Any:
    values = _numbers(field, raw, kind, low, high)
    if len(values) > 1:
        raise BenchRequestInvalid(field, _("one value (sweep concurrency or rate)"))
    return values[0] if values else None


def parse_goodput(raw: Any) -> dict[str, float]:
    """``"ttft:800 tpot:50"`` (vLLM's KEY:VALUE pairs, milliseconds) or a dict."""
    if raw in (None, "", {}):
        return {}
    pairs: list[tuple[Any, Any]]
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, str):
        try:
            pairs = [
                (k, float(v))
                for k, v in (p.split(":", 1) for p in raw.replace(",", " ").split())
            ]
        except ValueError:
            raise BenchRequestInvalid(
                "goodput",
                _("{raw!r}: KEY:MS pairs, e.g. ttft:800 tpot:50").format(raw=raw),
            ) from None
    else:
        raise BenchRequestInvalid("goodput", _("KEY:MS pairs, e.g. ttft:800 tpot:50"))
    out: dict[str, float] = {}
    for name, ms in pairs:
        if name not in GOODPUT_NAMES:
            raise BenchRequestInvalid(
                "goodput",
                _("{name!r}: use {names}").format(
                    name=name, names=", ".join(GOODPUT_NAMES)
                ),
            )
        if isinstance(ms, bool) or not isinstance(ms, int | float) or not 0 < ms:
            raise BenchRequestInvalid(
                "goodput", _("{name}: a number of ms above 0").format(name=name)
            )
        out[name] = float(ms)
    return out


def bench_request(
    raw: dict[str, Any], *, default_shape: tuple[int, int]
) -> dict[str, Any]:
    """The operation's ``params["bench"]``: the sweep's points (each a shape for
    ``node.bench_serve``), what is swept, and the label. ``default_shape`` is the
    profile target's (input_len, output_len)."""
    concurrency, rates = _sweep(raw)
    common = _point_fields(raw, default_shape, finite_rate=bool(rates))
    target = str(raw.get("target") or "head")
    if target not in TARGETS:
        raise BenchRequestInvalid(
            "target",
            _("head (straight to the engine) or gateway (through the console)"),
        )
    points = [
        _point(conc, rate, common)
        for conc in concurrency or [None]
        for rate in rates or [None]
    ]
    total = sum(p["num_prompts"] for p in points)
    if total > BENCH_MAX_PROMPTS:
        raise BenchRequestInvalid(
            "num_prompts",
            _("{total} prompts in the sweep; at most {n}").format(
                total=total, n=BENCH_MAX_PROMPTS
            ),
        )
    swept = "request_rate" if len(rates) > 1 else "concurrency"
    return {"points": points, "swept": swept, "label": common.label, "target": target}


def _sweep(raw: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """The concurrencies and request rates asked for: one of them swept, at least
    one given."""
    concurrency = _numbers(
        "concurrency", raw.get("concurrency"), int, 1, BENCH_MAX_CONCURRENCY
    )
    rates = _numbers("request_rate", raw.get("request_rate"), float, 1e-3, 1e6)
    if len(concurrency) > 1 and len(rates) > 1:
        raise BenchRequestInvalid(
            "request_rate", _("sweep concurrency or request rate, not both")
        )
    if not concurrency and not rates:
        raise BenchRequestInvalid(
            "concurrency", _("give concurrency (e.g. 1,8,32) or a request rate")
        )
    return concurrency, rates


@dataclass(frozen=True)
class _PointFields:
    """What every point of one sweep shares."""

    input_len: int
    output_len: int
    num_prompts: int | None
    burstiness: float | None
    seed: int | None
    goodput: dict[str, float]
    label: str


def _point_fields(
    raw: dict[str, Any], default_shape: tuple[int, int], *, finite_rate: bool
) -> _PointFields:
    input_len = (
        _one("input_len", raw.get("input_len"), int, 1, BENCH_MAX_LEN)
        or default_shape[0]
    )
    output_len = (
        _one("output_len", raw.get("output_len"), int, 1, BENCH_MAX_LEN)
        or default_shape[1]
    )
    num_prompts = _one("num_prompts", raw.get("num_prompts"), int, 1, BENCH_MAX_PROMPTS)
    burstiness = _one("burstiness", raw.get("burstiness"), float, 1e-3, 100)
    seed = _one("seed", raw.get("seed"), int, 0, 2**31 - 1)
    goodput = parse_goodput(raw.get("goodput"))
    label = str(raw.get("label") or "").strip()
    if label and not BENCH_LABEL_RE.match(label):
        raise BenchRequestInvalid("label", _("letters, digits, . _ - (at most 64)"))
    if burstiness is not None and not finite_rate:
        raise BenchRequestInvalid(
            "burstiness",
            _("applies to a finite request rate only (vLLM ignores it at inf)"),
        )
    return _PointFields(
        input_len, output_len, num_prompts, burstiness, seed, goodput, label
    )


def _point(
    conc: int | None, rate: float | None, common: _PointFields
) -> dict[str, Any]:
    """One sweep point's shape, its keys in the order ``node.bench_serve`` logs them."""
    shape: dict[str, Any] = {
        "input_len": common.input_len,
        "output_len": common.output_len,
        # enough requests to hold the concurrency for a while: 5 waves, 10 at least
        "num_prompts": common.num_prompts or max(10, 5 * (conc or 2)),
    }
    if conc is not None:
        shape["max_concurrency"] = conc
    if rate is not None:
        shape["request_rate"] = rate
        if common.burstiness is not None:
            shape["burstiness"] = common.burstiness
    if common.goodput:
        shape["goodput"] = common.goodput
    if common.label:
        shape["label"] = common.label
    if common.seed is not None:
        shape["seed"] = common.seed
    return shape


def point_name(shape: dict[str, Any]) -> str:
    """How a sweep point reads in a step name."""
    parts = []
    if shape.get("max_concurrency") is not None:
        parts.append(f"concurrency {shape['max_concurrency']}")
    if shape.get("request_rate") is not None:
        parts.append(f"{shape['request_rate']:g} req/s")
    return ", ".join(parts) or "all at once"

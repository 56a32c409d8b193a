"""Pure rule evaluation: one rule, one target's latest value, its open alert → what should happen.

No database here: ``monitoring.alerts.evaluation.alerts_evaluate`` feeds observations in
and applies the verdicts in bulk.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

COMPARE: dict[str, Callable[[float, float], bool]] = {
    "gt": operator.gt,
    "ge": operator.ge,
    "lt": operator.lt,
    "le": operator.le,
    "eq": operator.eq,
    "ne": operator.ne,
}


@dataclass(frozen=True)
class Observation:
    """The latest value of one metric for one target, with what the alert should carry."""

    target: str
    value: float
    cluster_id: int | None = None
    node_id: int | None = None
    labels: dict[str, Any] = field(default_factory=dict)
    at: datetime | None = None  # time of the sample the value came from


@dataclass(frozen=True)
class RuleSpec:
    """What evaluation needs of an ``AlertRule``."""

    comparison: str
    threshold: float
    resolve_threshold: float | None
    for_s: int


@dataclass(frozen=True)
class OpenAlert:
    """What evaluation needs of an unresolved ``Alert``."""

    state: str  # pending | firing | acknowledged
    pending_at: datetime


class Action(Enum):
    NOTHING = "nothing"
    OPEN_PENDING = "open_pending"  # new bad target, for_s not yet reached
    OPEN_FIRING = "open_firing"  # new bad target, for_s == 0
    FIRE = "fire"  # pending long enough
    CLEAR = "clear"  # pending target good again before firing
    RESOLVE = "resolve"  # firing/acknowledged target past the resolve threshold
    UPDATE = "update"  # still open: refresh the value


def is_bad(spec: RuleSpec, value: float) -> bool:
    return COMPARE[spec.comparison](value, spec.threshold)


def is_recovered(spec: RuleSpec, value: float) -> bool:
    """Past the resolve threshold (hysteresis): ``value > 80`` stays firing for a ``> 85 / resolve 80`` rule."""
    limit = spec.threshold if spec.resolve_threshold is None else spec.resolve_threshold
    return not COMPARE[spec.comparison](value, limit)


def evaluate(
    spec: RuleSpec, value: float, open_alert: OpenAlert | None, now: datetime
) -> Action:
    """Decide the transition of one rule + target; raises KeyError on an unknown comparison."""
    if open_alert is None:
        if not is_bad(spec, value):
            return Action.NOTHING
        return Action.OPEN_FIRING if spec.for_s <= 0 else Action.OPEN_PENDING
    if open_alert.state == "pending":
        if not is_bad(spec, value):
            return Action.CLEAR
        if (now - open_alert.pending_at).total_seconds() >= spec.for_s:
            return Action.FIRE
        return Action.UPDATE
    if is_recovered(spec, value):
        return Action.RESOLVE
    return Action.UPDATE


def silence_matches(
    silence: dict[str, Any],
    *,
    rule_id: int,
    target: str,
    cluster_id: int | None,
    labels: dict[str, Any],
) -> bool:
    """True when every matcher the silence gives matches (rule, target, cluster, labels)."""
    if silence.get("rule_id") and silence["rule_id"] != rule_id:
        return False
    if silence.get("target") and silence["target"] != target:
        return False
    if silence.get("cluster_id") and silence["cluster_id"] != cluster_id:
        return False
    return all(
        str(labels.get(k)) == str(v) for k, v in (silence.get("matchers") or {}).items()
    )

"""Operational content in the reader's language, rendered at read time.

Workers and rules write step names, decisions and engine states once, for every reader.
Each entry below is a message id with named parameters and its English form; a reader
sees the translation with the same parameters filled in. Stored values are either
``{"id": ..., "params": {...}}`` (what writers should store) or the English text older
rows carry, which is matched against the English forms. Unknown text is shown as it is.
``static/console/js/format.js`` (``consoleFormat.msg``) applies the same catalogue to
pushed events, from the JSON ``catalog_for_js`` gives the page.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import (
    gettext_noop as _lazy,  # marked for the catalogue, translated in render()
)

from console import opschecks
from console.models import ClusterState, OperationKind, OperationState
from console.models.operations import StepState

# id → the English form (the msgid), with {named} parameters. Order matters: more
# specific forms first.
MESSAGES: dict[str, str] = {
    "step.stop_first": _lazy("Stop first: {step}"),
    "step.agents_reachable": _lazy("Agents reachable"),
    "step.plan_valid": _lazy("Launch plan valid and fits in HBM"),
    "step.same_versions": _lazy("Same versions and model on every node"),
    "step.preflight_on": _lazy("Preflight checks on {node}"),
    "step.preflight_spare": _lazy("Preflight on the spare {node}"),
    "step.checks_on": _lazy("Checks on {node}"),
    "step.forced": _lazy("Preflight failed but an admin forced the start"),
    "step.clear_leftovers": _lazy("Clear leftover engines"),
    "step.rank0_listening": _lazy("Rank 0 listening on {address}"),
    "step.start_rank": _lazy("Start rank {rank} on {node}"),
    "step.stop_rank": _lazy("Stop rank {rank} on {node}"),
    "step.drain": _lazy("Drain: wait for in-flight requests"),
    "step.head_health": _lazy("Head /health answers 200 (all ranks joined)"),
    "step.smoke": _lazy("Smoke test: one completion"),
    "step.warmup": _lazy("Warm-up requests"),
    "step.rollback": _lazy("Roll back: stop the ranks this operation started"),
    "step.rollback_replace": _lazy(
        "Roll back: {old} back at rank {rank}, {spare} back to spare"
    ),
    "step.choose_spare": _lazy("Choose an idle spare of the same hardware"),
    "step.swap": _lazy("Swap {old} for {spare} in the inventory"),
    "step.record_failed_links": _lazy("Record the failing HCCS links of {node}"),
    "step.weights_sha256": _lazy("sha256 of the model files on {node}"),
    "step.weights_compare": _lazy("Compare sha256 across nodes"),
    "step.bench_point_gateway": _lazy(
        "Benchmark at {point} through the gateway, from {node}"
    ),
    "step.bench_point": _lazy("Benchmark at {point} on {node}"),
    # a sweep point (console.services.bench_runs.point_name), inside the step name
    "bench.point_both": _lazy("concurrency {concurrency}, {rate} req/s"),
    "bench.point_concurrency": _lazy("concurrency {concurrency}"),
    "bench.point_rate": _lazy("{rate} req/s"),
    "bench.point_at_once": _lazy("all at once"),
    "step.bench_targets": _lazy("Check the results against the profile's targets"),
    "step.verify_switch": _lazy(
        "Verify the switch on {node}: HCCS counters still, RoCE counters growing"
    ),
    # step summaries the preflight runbook writes (console/services/runbooks/preflight.py)
    "summary.checks_warned": _lazy("{count} checks passed, {warnings} warnings"),
    "summary.checks_passed": _lazy("{count} checks passed"),
    "summary.agents_answered": _lazy("{count} agents answered"),
    "summary.no_answer": _lazy("no answer from {nodes}"),
    "summary.unreachable": _lazy("agent unreachable; checks not run"),
    "summary.identical": _lazy("identical on every node"),
    "summary.no_node": _lazy("no node answered"),
}

# Single words workers write (engine process states, remediation decisions).
ENGINE_STATES: dict[str, str] = {
    "running": _lazy("running"),
    "stopped": _lazy("stopped"),
    "exited": _lazy("exited"),
    "starting": _lazy("starting"),
    "failed": _lazy("failed"),
    "unknown": _lazy("unknown"),
}
DECISIONS: dict[str, str] = {
    "act": _lazy("act"),
    "verify": _lazy("verify"),
    "recovered": _lazy("recovered"),
    "skip": _lazy("skip"),
    "join": _lazy("join"),
    "escalate": _lazy("escalate"),
    "approve": _lazy("approve"),
    "reject": _lazy("reject"),
}

_PARAM = re.compile(r"\{(\w+)\}")
_AFTER_FULL_WIDTH = re.compile(r"(?<=[\u3001\u3002\uff08\uff09\uff0c\uff1a\uff1b]) ")


@cache
def _patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Each message id with a regex matching its English form (parameters as groups)."""
    out = []
    for mid, english in MESSAGES.items():
        parts = _PARAM.split(english)
        regex = "".join(
            re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts)
        )
        out.append((mid, re.compile(f"^{regex}$")))
    return tuple(out)


def register(messages: dict[str, str]) -> None:
    """Add another app's forms (monitoring/opstext.py, from its AppConfig.ready()):
    console cannot import monitoring, so monitoring hands its forms over."""
    MESSAGES.update(messages)
    _patterns.cache_clear()


# Sentences found inside longer English prose (a remedy's "why"), replaced wherever
# they occur; registered by monitoring (monitoring/opstext.py SENTENCES).
SENTENCES: dict[str, str] = {}


def register_sentences(sentences: dict[str, str]) -> None:
    SENTENCES.update(sentences)
    _sentence_patterns.cache_clear()


@cache
def _sentence_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for english_form in sorted(SENTENCES.values(), key=len, reverse=True):
        parts = _PARAM.split(english_form)
        regex = "".join(
            re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts)
        )
        out.append((english_form, re.compile(regex)))
    return tuple(out)


def prose(text: str) -> str:
    """English prose with every known sentence in the active language; the rest as is."""
    changed = text
    for form, regex in _sentence_patterns():

        def translated(m: re.Match[str], form: str = form) -> str:
            return _(form).format(**m.groupdict())

        changed = regex.sub(translated, changed)
    if changed == text:
        return text
    # the space English puts after a sentence is not written after full-width punctuation
    return _AFTER_FULL_WIDTH.sub("", changed)


def english(mid: str) -> str:
    return MESSAGES[mid]


def render(value: Any) -> str:
    """``value`` (a message dict or stored English text) in the active language."""
    if isinstance(value, dict) and value.get("id") in MESSAGES:
        params = {k: render(v) for k, v in (value.get("params") or {}).items()}
        return _(english(value["id"])).format(**params)
    if not isinstance(value, str):
        return "" if value is None else str(value)
    for mid, regex in _patterns():
        m = regex.match(value)
        if m:
            params = {k: render(v) for k, v in m.groupdict().items()}
            return _(english(mid)).format(**params)
    return prose(value)


def word(table: dict[str, str], value: str | None) -> str:
    """A single vocabulary word (engine state, decision) in the active language."""
    if not value:
        return ""
    return _(table[value]) if value in table else value


def catalog_for_js() -> dict[str, Any]:
    """The catalogue for format.js: [[regex source, translated form], ...] and the words."""
    return {
        "messages": [[r.pattern, _(english(mid))] for mid, r in _patterns()],
        "checks": opschecks.catalog_for_js(),
        "engine": {k: _(v) for k, v in ENGINE_STATES.items()},
        "kinds": {k: str(label) for k, label in OperationKind.choices},
        # Pushed events carry state codes; their labels were made in the publisher's language.
        "op_states": {k: str(label) for k, label in OperationState.choices},
        "step_states": {k: str(label) for k, label in StepState.choices},
        "cluster_states": {k: str(label) for k, label in ClusterState.choices},
    }

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
from engine import checktext

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
    "step.gate": _lazy("Correctness gate"),
    # the gate's verdicts (engine/gate.py verdict; console/services/acceptance.py)
    "gate.failed": _lazy("correctness gate failed: {reason}"),
    "gate.insane": _lazy("{count} answer(s) failed sanity; {sample}: {problem}"),
    "gate.low": _lazy(
        "accuracy {accuracy} < baseline {baseline} − threshold {threshold} (wrong: {wrong})"
    ),
    "gate.ok": _lazy("accuracy {accuracy} ≥ {floor}; every answer sane"),
    "gate.off": _lazy("gate off for this cluster"),
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
    # step summaries of the other runbooks (console/services/runbooks/*.py); the more
    # specific form of two that could match the same text comes first
    "summary.hccs_baseline": _lazy("{node}: HCCS {rate} packets/s before the change"),
    "summary.hccs_no_counters": _lazy(
        "{node}: no HCCS counters (unsupported or empty): the switch will not be verifiable"
    ),
    "summary.verify_switched": _lazy("switched: {reason}"),
    "summary.verify_not_switched": _lazy("not_switched: {reason}"),
    "summary.verify_cannot": _lazy("cannot_verify: {reason}"),
    "summary.not_a_node": _lazy("{name} is not a node of {cluster}"),
    "summary.no_spare": _lazy(
        "no idle spare with {count} × {model} ({hbm} GB) for {node}"
    ),
    "summary.spare_takes": _lazy("{spare} takes rank {rank} from {old}"),
    "summary.links_lose": _lazy("{node}: {count} HCCS links lose ≥ {pct} %: {links}"),
    "summary.npu_link": _lazy("NPU {npu} chip {chip} link {link}"),
    "summary.no_link_measured": _lazy(
        "{node}: no link measured above {pct} % loss (no traffic or counters "
        "unsupported?): re-admission cannot check them"
    ),
    "summary.swapped": _lazy(
        "{spare} is rank {rank}; {old} is out of service until re-admitted"
    ),
    "summary.stopped_failed": _lazy("stopped {nodes}; failed: {failures}"),
    "summary.stopped_detail": _lazy("stopped ({detail})"),
    "summary.stopped_nodes": _lazy("stopped {nodes}"),
    "summary.nothing_running": _lazy("nothing left running"),
    "summary.pid": _lazy("pid {pid}"),
    "summary.engine_not_started": _lazy("engine did not start"),
    "summary.engine_is": _lazy("engine on {node} is {state} ({detail})"),
    "summary.accepts": _lazy("{address} accepts connections"),
    "summary.rank0_before_bind": _lazy(
        "rank 0 engine {state} before binding its RPC port"
    ),
    "summary.nothing_listens": _lazy("nothing listens on {address} after {seconds}s"),
    "summary.head_engine": _lazy("the head engine {state}: {detail}"),
    "summary.health_timeout": _lazy(
        "/health not 200 after {seconds}s ({joined}/{total} ranks joined)"
    ),
    "summary.health_ok": _lazy("/health 200, {joined}/{total} ranks joined"),
    "summary.ranks_joined": _lazy("{joined}/{total} ranks joined"),
    "summary.rank_state": _lazy("rank {rank} on {node} {state}: {detail}"),
    "summary.completion_failed": _lazy("completion failed: {error}"),
    "summary.completion_empty": _lazy("completion returned empty text"),
    "summary.smoke_words": _lazy("{count} words: {text}"),
    "summary.warmup_skipped": _lazy("skipped (0 requests)"),
    "summary.warmup_progress": _lazy("{done}/{total} sent, {errors} failed"),
    "summary.warmup_failed": _lazy("{errors} of {total} warm-up requests failed"),
    "summary.warmup_done": _lazy("{total} requests, {errors} failed"),
    "summary.head_not_serving": _lazy("head not serving; nothing to drain"),
    "summary.still_in_flight": _lazy(
        "{count} requests still in flight after {seconds}s; stopping anyway"
    ),
    "summary.none_in_flight": _lazy("no requests in flight"),
    "summary.in_flight": _lazy("{count} requests in flight"),
    "summary.still_running": _lazy("still running (pid {pid})"),
    # console/services/runbooks/weights.py
    "summary.hash_progress": _lazy("{done} of {total}, file {file_no}/{files}: {file}"),
    "summary.agent_error": _lazy("the agent answered with an error: {error}"),
    "summary.head_agent_error": _lazy(
        "the head's agent answered with an error: {error}"
    ),
    "summary.no_model_dir": _lazy("no model directory at {path} on {node}"),
    "summary.hashed": _lazy(
        "{files} files, {size}; {cached} from the cache, {read} read"
    ),
    "summary.no_answer_within": _lazy("no answer within {seconds}s ({setting})"),
    "summary.files_differ": _lazy(
        "files differ: {diffs} — copy them again from a good node (rsync -a --checksum)"
    ),
    "summary.on_node": _lazy("{node}: {detail}"),  # only from a stored id
    "summary.not_every_node": _lazy("not every node answered: {nodes}"),
    "summary.weights_identical": _lazy(
        "{files} files identical (sha256) on all {count} nodes"
    ),
    # console/services/runbooks/bench.py
    "summary.bench_progress_ttft": _lazy(
        "{done}/{total} prompts, {seconds} s; engine TTFT so far p50 {p50} ms, p99 {p99} ms"
    ),
    "summary.bench_progress": _lazy("{done}/{total} prompts, {seconds} s"),
    "summary.result_unusable": _lazy(
        "the tool's --save-result file is not usable: {error}"
    ),
    "summary.bench_figures_npu": _lazy(
        "#{pk}: {ok} ok, {failed} failed; {tps} output tok/s, {per_npu} tok/s per NPU; "
        "TTFT p50 {p50} ms, p99 {p99} ms; TPOT p99 {tpot} ms"
    ),
    "summary.bench_figures": _lazy(
        "#{pk}: {ok} ok, {failed} failed; {tps} output tok/s; "
        "TTFT p50 {p50} ms, p99 {p99} ms; TPOT p99 {tpot} ms"
    ),
    "summary.bench_line_checks": _lazy(
        "#{pk} concurrency {concurrency}: {verdict} — {checks}"
    ),
    "summary.bench_line": _lazy("#{pk} concurrency {concurrency}: {verdict}"),
    "summary.regressed": _lazy("{verdict} REGRESSED against the baseline"),
    "summary.accepted": _lazy("ACCEPTED"),
    "summary.not_accepted": _lazy("NOT ACCEPTED"),
    "summary.no_target": _lazy("no target"),
    "summary.target_pass_margin": _lazy("{name} pass ({margin}%)"),
    "summary.target_fail_margin": _lazy("{name} FAIL ({margin}%)"),
    "summary.target_pass": _lazy("{name} pass"),
    "summary.target_fail": _lazy("{name} FAIL"),
    "summary.bench_rejected": _lazy("not accepted: {lines}"),
    "summary.bench_no_target": _lazy("no target at these shapes: {lines}"),
    # an operation's error when a step failed (runbooks/base.py Run.fail): by id only
    "op.step_error": _lazy("{step}: {summary}"),
}

# The items of detail lists the engine writes inside checks (engine/checktext.py ITEMS).
MESSAGES.update(checktext.ITEMS)

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
        if not re.search(r"[^\W\d_]", _PARAM.sub("", english)):
            continue  # parameters and punctuation only ("{node}: {detail}"): by id only
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
    """``value`` (a message dict, a join of several, or stored English text) in the
    active language."""
    if isinstance(value, dict) and "join" in value:
        return str(value["join"]).join(render(v) for v in value.get("items") or [])
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


def english_text(value: Any) -> str:
    """The English of a message dict (what the summary field stores, for logs/the CLI)."""
    return checktext.text(value, MESSAGES)


def message(mid: str, **params: Any) -> dict[str, Any]:
    """A message to store: its id and params; KeyError for an unknown id."""
    MESSAGES[mid]  # noqa: B018 - a typo must not ship as a silent English string
    return {"id": mid, "params": params}


def operation_error(error: str, steps: Any) -> str:
    """An operation's stored error in the active language: "{step}: {summary}" of the
    step that failed (Run.fail) with both parts rendered; other errors as ``render``."""
    for s in steps:
        if s.state == "failed" and error == f"{s.name}: {s.summary}":
            shown = getattr(s, "summary_text", None)  # the view's, checks included
            summary = shown or render((s.data or {}).get("summary_msg") or s.summary)
            return _(english("op.step_error")).format(
                step=render(s.name), summary=summary
            )
    return render(error)


def word(table: dict[str, str], value: str | None) -> str:
    """A single vocabulary word (engine state, decision) in the active language."""
    if not value:
        return ""
    return _(table[value]) if value in table else value


def catalog_for_js() -> dict[str, Any]:
    """The catalogue for format.js: [[regex source, translated form], ...] and the words."""
    return {
        "messages": [[r.pattern, _(english(mid))] for mid, r in _patterns()],
        # stored message dicts ({"id", "params"}) and the sentences prose() replaces
        "by_id": {mid: _(english(mid)) for mid in MESSAGES},
        "sentences": [[r.pattern, _(form)] for form, r in _sentence_patterns()],
        "checks": opschecks.catalog_for_js(),
        "engine": {k: _(v) for k, v in ENGINE_STATES.items()},
        "kinds": {k: str(label) for k, label in OperationKind.choices},
        # Pushed events carry state codes; their labels were made in the publisher's language.
        "op_states": {k: str(label) for k, label in OperationState.choices},
        "step_states": {k: str(label) for k, label in StepState.choices},
        "cluster_states": {k: str(label) for k, label in ClusterState.choices},
    }

"""Which remedy an HCCS link fault gets, from the server model's capabilities (issue 13).

engine.capabilities.remedies_for states, per server model, whether each remedy can have
an effect and why (with its sources: the HCCL env-var doc and channel code). Automatic
mode runs only a remedy that can work (next_remedy); the incident's timeline says which
one runs and why the others do not, before anything restarts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from console.models import Node
from console.selectors import last_start_seconds, spare_for
from engine.capabilities import (
    ESCALATE,
    HONOURED,
    NO,
    ROCE_FAILOVER,
    SOURCES,
    UNKNOWN_MODEL,
    YES,
    Remedy,
    capability,
    next_remedy,
    remedies_for,
    remedy_statement,
)
from monitoring.models import Incident, NodeLatest, RemediationAction
from monitoring.remediation.timeline import _escalate, _note, _set

_ACTION_OF_REMEDY = {
    ROCE_FAILOVER: RemediationAction.FAILOVER,
    "replace_with_spare": RemediationAction.REPLACE,
}


def link_remedies(node: Node) -> tuple[str, list[Remedy]]:
    """(server model, ordered remedies) for an HCCS link fault on ``node``."""
    model = node.effective_server_model
    spare = spare_for(node)
    latest = NodeLatest.objects.filter(node=node).first()
    data = (latest.data or {}) if latest else {}
    counters = None if not data else not data.get("hccs_unsupported")
    remedies = remedies_for(
        model,
        # a spare never preflighted yet is checked by the replace runbook's spare
        # preflight, which refuses one whose detected model differs (remedies.py)
        spare_available=spare is not None
        and spare.effective_server_model in (model, UNKNOWN_MODEL),
        hccs_counters_supported=counters,
        last_start_s=last_start_seconds(node.cluster),
    )
    # The RoCE pair goes to every rank: every rank's server must honour the switch.
    if (
        remedies[0].key == ROCE_FAILOVER
        and remedies[0].can_work == YES
        and node.cluster
    ):
        others = [
            n
            for n in node.cluster.ranked_nodes()
            if capability(n.effective_server_model).roce_switch != HONOURED
        ]
        if others:
            roce = dataclasses.replace(
                remedies[0],
                can_work=NO,
                why=(
                    "The RoCE pair is applied to every rank of the engine, and HCCL "
                    "ignores it on "
                    + ", ".join(
                        f"{n.name} ({capability(n.effective_server_model).label})"
                        for n in others
                    )
                    + ". "
                    + remedies[0].why
                ),
            )
            remedies = [remedies[1], roce, *remedies[2:]]
    return model, remedies


def link_remedy_choose(
    incident: Incident,
    *,
    tried: tuple[str, ...] = (),
    because: str = "",
    **more: Any,
) -> bool:
    """Set the incident's action to the next remedy that can work on this hardware and
    say why on its timeline; escalate (False) when none is left. ``because``/``more``:
    why the previous remedy could not go ahead, and its evidence."""
    node = incident.node
    assert node is not None
    model, remedies = link_remedies(node)
    label = capability(model).label
    statement = remedy_statement(model, remedies)
    evidence: dict[str, Any] = {
        "server_model": model,
        "remedies": [r.to_dict() for r in remedies],
        "statement": statement,
        "tried": list(tried),
        **more,
    }
    chosen = next_remedy(remedies, tried)
    skipped = [
        r
        for r in remedies
        if r.key not in (chosen.key, ESCALATE, *tried) and r.can_work != YES
    ]
    # the source first: the timeline line is cut at 500 characters (the full
    # statement, every remedy with its sources, is in the event's data)
    why_not = " ".join(
        f"Not run: {r.key} (can work here: {r.can_work}"
        + (
            f"; source: {SOURCES[r.sources[0]]}"
            if r.sources and r.sources[0] in SOURCES
            else ""
        )
        + f"): {r.why}"
        for r in skipped
    )
    if chosen.key == ESCALATE:
        _escalate(
            incident,
            (f"{because}. " if because else "")
            + f"{node.name} ({label}): no remedy that can have an effect is left"
            + (f" after {', '.join(tried)}" if tried else "")
            + f". {why_not} Options: {statement}",
            **evidence,
        )
        return False
    _set(incident, action=_ACTION_OF_REMEDY[chosen.key])
    _note(
        incident,
        "remedy",
        f"{node.name} ({label}): {chosen.key}. {why_not}".strip(),
        chosen=chosen.key,
        **evidence,
    )
    return True

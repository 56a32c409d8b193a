"""The remedies for an HCCS link fault on one node, in the order to try, each saying
whether it can work on this server model and why; and which of them automatic mode
runs. Separate from ``servers`` because it is the decision built on those facts,
not the facts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from engine.capabilities.servers import (
    HONOURED,
    IGNORED,
    NO,
    SOURCES,
    UNKNOWN,
    UNKNOWN_MODEL,
    YES,
    ServerCapability,
    capability,
)

ROCE_FAILOVER = "roce_failover"
REPLACE_WITH_SPARE = "replace_with_spare"
ESCALATE = "escalate"


@dataclass(frozen=True)
class Remedy:
    """One remedy for an HCCS link fault on a node, as the console states it beforehand.

    ``can_work``: YES / NO / UNKNOWN. Automatic mode runs only YES (see
    :func:`automatic_remedies`). ``verifiable``: whether its effect can be checked
    with this node's counters (False means the verdict will be "cannot verify").
    ``restarts_engine`` and ``expected_downtime_s`` (the engine's last measured start
    time, None when never measured) are what ask mode shows.
    """

    key: str
    can_work: str
    why: str
    sources: tuple[str, ...]
    restarts_engine: bool
    verifiable: bool | None
    expected_downtime_s: float | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["source_text"] = [SOURCES[s] for s in self.sources if s in SOURCES]
        return d


def remedies_for(
    server_model: str | None,
    *,
    spare_available: bool,
    hccs_counters_supported: bool | None = None,
    last_start_s: float | None = None,
    cann_version: str | None = None,
) -> list[Remedy]:
    """Ordered remedies for HCCS loss on a node of ``server_model``, each saying whether
    it can have an effect here and why (with its sources).

    - ``spare_available``: an idle spare of the same server model exists.
    - ``hccs_counters_supported``: what the node's last sample said (collect's
      ``not hccs_unsupported``); None = not known yet, the model's entry decides.
    - ``last_start_s``: the engine's last measured start time (expected downtime of a
      remedy that restarts it).
    - ``cann_version``: recorded in the reason. The facts were read from the current
      open-source HCCL (SOURCES); older CANN releases were not read.

    The order is the one to try: a RoCE failover first only where HCCL honours the
    switch; then drain + replace by a same-model spare; escalation always last.
    """
    cap = capability(server_model)
    counters = (
        cap.hccs_counters
        if hccs_counters_supported is None
        else hccs_counters_supported
    )
    roce = _roce_failover(cap, counters, last_start_s, cann_version)
    spare = _replace_with_spare(cap, spare_available, last_start_s)
    escalate = _escalate()
    return [roce, spare, escalate] if roce.can_work == YES else [spare, roce, escalate]


def _roce_failover(
    cap: ServerCapability,
    counters: bool | None,
    last_start_s: float | None,
    cann_version: str | None,
) -> Remedy:
    """Switch HCCL from HCCS to RoCE: works where this model's HCCL honours the switch."""
    cann = f" (this node runs CANN {cann_version})" if cann_version else ""
    roce_can = {HONOURED: YES, IGNORED: NO}.get(cap.roce_switch, UNKNOWN)
    roce_why = cap.roce_switch_why
    if roce_can == YES:
        roce_why += (
            " The same HCCL_INTRA_PCIE_ENABLE=0 / HCCL_INTRA_ROCE_ENABLE=1 pair is applied "
            "to every rank of the engine (vllm-ascend reads the pair in every rank to pick "
            "the MoE dispatch/combine arguments)."
        )
        if not counters:
            roce_why += (
                " This node's HCCS counters are unsupported, so the switch cannot be "
                "verified; the verdict will be 'cannot verify' and the next remedy follows."
            )
    return Remedy(
        key=ROCE_FAILOVER,
        can_work=roce_can,
        why=roce_why + cann,
        sources=cap.sources.get("roce_switch", ("hccl-env-doc",))
        + (("vllm-ascend-mc2",) if roce_can == YES else ()),
        restarts_engine=True,
        verifiable=bool(counters) if counters is not None else None,
        expected_downtime_s=last_start_s,
    )


def _replace_with_spare(
    cap: ServerCapability, spare_available: bool, last_start_s: float | None
) -> Remedy:
    """Drain the node and start with an idle same-model spare in its rank."""
    if spare_available:
        spare_why = (
            f"Drain this node and start the engine with an idle {cap.label} spare in its "
            "rank: the faulty HCCS module leaves the engine, whatever HCCL does with the "
            "switch. The spare must be the same server model, so the engine's ranks keep "
            "one link layout."
        )
        spare_can = YES if cap.key != UNKNOWN_MODEL else UNKNOWN
        if spare_can == UNKNOWN:
            spare_why += (
                " The server model is unknown, so 'same model' cannot be checked."
            )
    else:
        spare_can = NO
        spare_why = (
            f"No idle spare of the same server model ({cap.label}) is available."
        )
    return Remedy(
        key=REPLACE_WITH_SPARE,
        can_work=spare_can,
        why=spare_why,
        sources=(),
        restarts_engine=True,
        verifiable=True,  # the spare's own HCCS counters / the loss alert resolving
        expected_downtime_s=last_start_s,
    )


def _escalate() -> Remedy:
    """Hand the fault to an operator: always possible, restarts nothing, always last."""
    return Remedy(
        key=ESCALATE,
        can_work=YES,
        why=(
            "Raise the alert to an operator with the evidence (per-link HCCS counters, "
            "loss rate) and the options above; nothing restarts."
        ),
        sources=(),
        restarts_engine=False,
        verifiable=None,
        expected_downtime_s=0.0,
    )


def automatic_remedies(remedies: list[Remedy]) -> list[Remedy]:
    """The remedies automatic mode may run, in order: only those that can work (YES).

    A remedy whose effect is NO or UNKNOWN on this hardware is never run automatically;
    escalation is always last.
    """
    return [r for r in remedies if r.can_work == YES]


def next_remedy(
    remedies: list[Remedy], tried: list[str] | tuple[str, ...] = ()
) -> Remedy:
    """The remedy automatic mode runs next: the first that can work (YES) and was not
    tried yet (a "cannot verify" or failed verdict moves on); escalation when none is
    left."""
    for remedy in automatic_remedies(remedies):
        if remedy.key not in tried:
            return remedy
    return next(r for r in remedies if r.key == ESCALATE)


def remedy_statement(server_model: str | None, remedies: list[Remedy]) -> str:
    """What the incident says before anything restarts: the model, then each remedy
    with whether it can work here, why, and its expected downtime."""
    cap = capability(server_model)
    lines = [f"Server model: {cap.label}."]
    for i, r in enumerate(remedies, start=1):
        downtime = (
            f"expected downtime ~{r.expected_downtime_s:.0f} s (last measured start)"
            if r.restarts_engine and r.expected_downtime_s is not None
            else "expected downtime unknown (no measured start)"
            if r.restarts_engine
            else "no restart"
        )
        cites = "; ".join(SOURCES[s] for s in r.sources if s in SOURCES)
        lines.append(
            f"{i}. {r.key} — can work here: {r.can_work}; {downtime}. {r.why}"
            + (f" [{cites}]" if cites else "")
        )
    return "\n".join(lines)

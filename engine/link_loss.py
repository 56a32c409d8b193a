"""HCCS loss is a rate over traffic: a state, not just a number.

Loss = (Δretries + ΔCRC errors) / Δtx packets per link between two samples of
``npu-smi info -t hccs``. When nothing was sent there is nothing to divide by, and
"0 %" or a blank would both lie: the state says ``no_traffic``. Likewise a driver
without ``-t hccs`` (collect's ``hccs_unsupported``) is ``unsupported``, a first
sample is ``no_baseline``, and counters that went backwards (driver reload, chip
reset) are ``reset``. Only ``measured`` carries a percentage.

A site that must see a link fault on an idle cluster can watch ``hccs health status``
of ``npu-smi info -t hccs`` (``NOK`` when the PCS or HDLC reports a fault, ascend-facts
§2), which needs no traffic, or send a small periodic request through the engine so
the links carry some.

Links are given as ingest stores them: per chip ``"npu.chip"`` a list of
``[tx, rx, retry, error]`` per link (monitoring/ingest/sample.py ``_parse_sample``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MEASURED = "measured"
NO_TRAFFIC = "no_traffic"
UNSUPPORTED = "unsupported"
NO_BASELINE = "no_baseline"
RESET = "reset"
LOSS_STATES = (MEASURED, NO_TRAFFIC, UNSUPPORTED, NO_BASELINE, RESET)

# Shown where the loss would be (node page, dashboard, exporter label).
LOSS_STATE_TEXT = {
    MEASURED: "measured",
    NO_TRAFFIC: "no traffic: loss cannot be measured",
    UNSUPPORTED: "HCCS counters unsupported (npu-smi info -t hccs)",
    NO_BASELINE: "first sample: no window yet",
    RESET: "counters reset: no window this round",
}

Links = list[list[int]]


@dataclass(frozen=True)
class LossReading:
    state: str  # one of LOSS_STATES
    pct: float | None  # only when state == MEASURED
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def chip_loss_reading(prev: Links | None, cur: Links) -> LossReading:
    """One chip's worst link over the window from ``prev`` to ``cur``.

    Retries or errors rising on a link that sent nothing read as 100 % (a dead link
    is traffic that failed, not idleness).
    """
    if not prev or len(prev) != len(cur):
        return LossReading(NO_BASELINE, None, LOSS_STATE_TEXT[NO_BASELINE])
    worst: float | None = None
    for (tx0, _rx0, rt0, er0), (tx1, _rx1, rt1, er1) in zip(prev, cur, strict=True):
        dtx, bad = tx1 - tx0, (rt1 - rt0) + (er1 - er0)
        if dtx < 0 or bad < 0:
            return LossReading(RESET, None, LOSS_STATE_TEXT[RESET])
        if dtx == 0 and bad == 0:
            continue
        loss = 100.0 if dtx == 0 else 100.0 * bad / dtx
        worst = loss if worst is None else max(worst, loss)
    if worst is None:
        return LossReading(NO_TRAFFIC, None, LOSS_STATE_TEXT[NO_TRAFFIC])
    return LossReading(MEASURED, worst, f"worst link {worst:.2f} %")


def node_loss_reading(
    prev: dict[str, dict[str, Any]] | None,
    cur: dict[str, dict[str, Any]],
    *,
    hccs_unsupported: bool = False,
) -> LossReading:
    """A node's HCCS loss state over all its chips.

    ``prev``/``cur``: ``{"npu.chip": {"links": Links, ...}}``. Any measured chip makes
    the node ``measured`` (worst chip); else the first non-measured state in the order
    unsupported, reset, no_baseline, no_traffic.
    """
    if hccs_unsupported or not cur:
        return LossReading(UNSUPPORTED, None, LOSS_STATE_TEXT[UNSUPPORTED])
    readings = [
        chip_loss_reading(((prev or {}).get(key) or {}).get("links"), chip["links"])
        for key, chip in sorted(cur.items())
    ]
    measured = [r.pct for r in readings if r.state == MEASURED and r.pct is not None]
    if measured:
        worst = max(measured)
        return LossReading(MEASURED, worst, f"worst link {worst:.2f} %")
    for state in (RESET, NO_BASELINE, NO_TRAFFIC):
        if any(r.state == state for r in readings):
            return LossReading(state, None, LOSS_STATE_TEXT[state])
    return LossReading(NO_TRAFFIC, None, LOSS_STATE_TEXT[NO_TRAFFIC])

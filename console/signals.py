"""Signals console sends for other apps (monitoring connects receivers in its ready()).

Sent once, after commit, from the one place that finishes the thing (STYLE §10).
"""

from __future__ import annotations

from django.dispatch import Signal

# A correctness gate finished: kwargs ``gate_run`` (console.models.GateRun).
# Sent by console.services.acceptance.acceptance_gate; monitoring.alerts.gate raises
# or resolves the "Correctness gate failed" alert from it.
gate_finished = Signal()

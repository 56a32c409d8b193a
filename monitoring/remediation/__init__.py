"""Alert-driven remediation: decide, act through operations, verify, move to the next remedy, escalate.

``monitoring.alerts.evaluation.alerts_evaluate`` calls ``alert_firing`` (after commit, on the
control worker) for an alert that fired with a remediation policy, and ``alert_resolved``
when it resolves. The control worker calls ``operation_finished`` after every operation;
the ones an incident started move the incident on.

Remedies, by the rule's action:
- failover: node N's intra-server link → RoCE (a ``failover`` operation restarting the
  deployment in rank order with N's HCCL_INTRA_* switched), only when N's RoCE ports are
  all UP and healthy (else: escalate, no restart). The operation verifies that N's HCCS
  counters stand still while RoCE grows; when they do not, the incident says so and
  moves to the second remedy:
- replace: an idle spare of the same hardware takes N's rank (``replace`` operation);
  N is marked out of service until an operator re-admits it after a passing preflight.
- restart: rank-ordered restart, retried with exponential backoff; after K failed
  attempts in the window: escalate.
- scale_out: start the standby cluster serving the same model (it joins the gateway's
  pool once Running); scale-in is manual.
Temperature never triggers an action. Guardrails: maintenance mode, one operation per
cluster, cooldown per rule, max automatic actions per hour per cluster. Every decision,
taken or skipped, goes to the alert's timeline and the audit log.
"""

from monitoring.remediation.approval import incident_approve, incident_reject
from monitoring.remediation.decide import alert_firing
from monitoring.remediation.outcomes import (
    alert_resolved,
    operation_finished,
    remediation_retry,
)
from monitoring.remediation.preconditions import roce_evidence
from monitoring.remediation.timeline import NEVER_ACT_ON, RemediationRefused

__all__ = [
    "NEVER_ACT_ON",
    "RemediationRefused",
    "alert_firing",
    "alert_resolved",
    "incident_approve",
    "incident_reject",
    "operation_finished",
    "remediation_retry",
    "roce_evidence",
]

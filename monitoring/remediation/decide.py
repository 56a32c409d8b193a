"""Deciding and acting: policy, guardrails, preconditions with evidence, then the operation."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.models import ClusterState, LinkMode, Node
from console.models.operations import Operation, OperationKind, OperationState
from console.selectors import spare_for, standby_for
from console.services.audit import audit_record
from console.services.operations import (
    OperationConflict,
    OperationRefused,
    operation_start,
)
from engine.capabilities import ROCE_FAILOVER

# One definition of a healthy RoCE port for the alert rules and the failover precondition.
from monitoring.alerts.selectors import ROCE_OK_HEALTH
from monitoring.models import (
    INCIDENT_OPEN_STATES,
    Alert,
    AlertEvent,
    AlertEventKind,
    Incident,
    IncidentState,
    NodeLatest,
    RemediationAction,
    RemediationPolicy,
)
from monitoring.remediation.links import link_remedy_choose
from monitoring.remediation.timeline import (
    _OPERATION_OF_ACTION,
    NEVER_ACT_ON,
    RemediationRefused,
    _escalate,
    _note,
    _set,
    incident_lock,
)

# -- decision ---------------------------------------------------------------------------


def alert_firing(alert: Alert, *, now: datetime | None = None) -> Incident | None:
    """Decide what to do about a firing alert; returns the incident (new or joined), or None."""
    now = now or timezone.now()
    alert = Alert.objects.select_related("rule", "cluster", "node").get(pk=alert.pk)
    rule = alert.rule
    if rule.remediation_policy == RemediationPolicy.OFF:
        return None
    if alert.silenced:  # a skipped decision is recorded like any other
        message = "no action: the alert is silenced"
        AlertEvent.objects.create(
            alert=alert,
            kind=AlertEventKind.REMEDIATION,
            message=message,
            data={"decision": "skip", "action": rule.remediation_action},
        )
        audit_record(
            action="remediation.skip",
            target=alert,
            target_repr=f"alert #{alert.pk} ({rule.name} {alert.target})",
            after={"action": rule.remediation_action, "reason": "silenced"},
            result="denied",
            message=message,
        )
        return None
    action = rule.remediation_action
    cluster = alert.cluster
    with transaction.atomic():
        if action != RemediationAction.NONE and cluster is not None:
            joined = (
                Incident.objects.select_for_update(of=("self",))
                .filter(cluster=cluster, action=action, state__in=INCIDENT_OPEN_STATES)
                .exclude(alert=alert)
                .first()
            )
            if (
                joined is not None
            ):  # e.g. "engine process failed" and "engine health failing" together
                message = f"joined incident #{joined.pk} ({joined.action}, already {joined.state})"
                AlertEvent.objects.create(
                    alert=alert,
                    kind=AlertEventKind.REMEDIATION,
                    message=message,
                    data={"incident": joined.pk, "decision": "join"},
                )
                audit_record(
                    action="remediation.join",
                    target=joined,
                    target_repr=f"incident #{joined.pk} ({joined.action} {joined.alert.target})",
                    after={"alert": alert.pk, "state": joined.state},
                    message=message[:300],
                )
                return joined
        incident = Incident.objects.create(
            alert=alert,
            cluster=cluster,
            node=alert.node,
            action=action,
            policy=rule.remediation_policy,
            state=IncidentState.SCHEDULED,
            fault_onset_at=alert.fault_onset_at,
            detected_at=alert.fired_at or now,
            decided_at=now,
        )
        reason = _guardrail(incident, now=now)
        if reason:
            _set(incident, state=IncidentState.SKIPPED, summary=reason)
            _note(incident, "skip", f"no action: {reason}")
            return incident
        if (
            incident.action == RemediationAction.FAILOVER
            and incident.node is not None
            and incident.node.link_mode != LinkMode.ROCE
            and not link_remedy_choose(incident)
        ):  # HCCS loss: the remedy comes from the server model's capabilities
            return incident
        problem = _precondition(incident)
        if (
            problem
            and incident.action == RemediationAction.FAILOVER
            and incident.node is not None
        ):  # e.g. its RoCE ports are down: the next remedy that can work, if any
            _note(
                incident, "next", f"{problem[0]}: trying the next remedy", **problem[1]
            )
            if not link_remedy_choose(
                incident, tried=(ROCE_FAILOVER,), because=problem[0], **problem[1]
            ):
                return incident
            problem = _precondition(incident)
        if problem:
            return _escalate(incident, problem[0], **problem[1])
        if incident.policy == RemediationPolicy.ASK:
            _set(
                incident,
                state=IncidentState.AWAITING_APPROVAL,
                summary=f"{action} waits for an operator's approval",
            )
            _note(
                incident,
                "ask",
                f"proposed: {_describe(incident)}; waiting for an operator to approve",
            )
            return incident
        _note(incident, "act", f"automatic: {_describe(incident)}")
        _execute(incident)
    return incident


def _describe(incident: Incident) -> str:
    node = incident.node.name if incident.node else incident.alert.target
    described: dict[str, str] = {
        RemediationAction.FAILOVER: f"fail {node}'s intra-server link over to RoCE (rank-ordered restart)",
        RemediationAction.REPLACE: f"replace {node} with an idle spare (rank-ordered restart)",
        RemediationAction.RESTART: f"restart {incident.cluster.name if incident.cluster else ''} in rank order",
        RemediationAction.SCALE_OUT: "start the standby cluster and add it to the gateway pool",
    }
    return described.get(incident.action, incident.action)


# Serving figures a benchmark's own load moves: alerts on them that began while one ran
# (or within BENCH_LOAD_GRACE_S after) are the benchmark's, not a fault to act on.
LOAD_METRICS = frozenset(
    {
        "engine.ttft_p99_ms",
        "engine.e2e_p99_ms",
        "engine.waiting",
        "engine.kv_cache_pct",
        "engine.kv_cache_pct_preempting",
        "engine.rank_waiting",
        "engine.rank_kv_cache_pct",
    }
)


def _benchmark_load(alert: Alert, cluster: Any, *, now: datetime) -> str:
    if alert.rule.metric not in LOAD_METRICS:
        return ""
    onset = alert.fault_onset_at or now
    grace = timedelta(seconds=settings.BENCH_LOAD_GRACE_S)
    bench = (
        Operation.objects.filter(
            cluster=cluster,
            kind=OperationKind.BENCHMARK,
            started_at__lte=onset,
            finished_at__gte=onset - grace,
        )
        .order_by("-pk")
        .first()
    )
    if bench is None:
        return ""
    return (
        f"{alert.rule.metric} rose under benchmark #{bench.pk}'s own load "
        f"(it ran {bench.started_at:%H:%M:%S}–{bench.finished_at:%H:%M:%S}); "
        "no automatic action"
    )


def _guardrail(incident: Incident, *, now: datetime) -> str:
    """Why no action may be taken now ('' = go ahead)."""
    alert, cluster = incident.alert, incident.cluster
    if alert.rule.metric in NEVER_ACT_ON:
        return "temperature alerts never trigger an automatic action (a hot chip is not restarted)"
    if incident.action == RemediationAction.NONE:
        return "the rule has a policy but no action"
    if cluster is None:
        return "the alert belongs to no cluster"
    if cluster.maintenance_mode:
        return f"{cluster.name} is in maintenance mode (automatic actions paused)"
    if (
        cluster.state not in (ClusterState.RUNNING, ClusterState.DEGRADED)
        and incident.action != RemediationAction.RESTART
    ):
        return f"{cluster.name} is {cluster.state}, not serving"
    running = Operation.objects.filter(
        cluster=cluster, finished_at__isnull=True
    ).first()
    if running is not None:
        return f"operation #{running.pk} ({running.kind}) is active on {cluster.name}"
    load = _benchmark_load(alert, cluster, now=now)
    if load:
        return load
    cooldown = timedelta(seconds=alert.rule.cooldown_s)
    recent = (
        Incident.objects.filter(
            cluster=cluster,
            action=incident.action,
            operation_started_at__gte=now - cooldown,
        )
        .exclude(pk=incident.pk)
        .order_by("-operation_started_at")
        .first()
    )
    if recent is not None:
        return f"cooldown: incident #{recent.pk} acted at {recent.operation_started_at:%H:%M:%S} (cooldown {alert.rule.cooldown_s} s)"
    hour = Incident.objects.filter(
        cluster=cluster, operation_started_at__gte=now - timedelta(hours=1)
    ).exclude(pk=incident.pk)
    acted = sum(max(1, i.attempts) for i in hour)
    if acted >= settings.REMEDIATION_MAX_ACTIONS_PER_HOUR:
        return f"{acted} automatic actions on {cluster.name} in the last hour (limit {settings.REMEDIATION_MAX_ACTIONS_PER_HOUR})"
    return ""


def roce_evidence(node: Node) -> tuple[bool, dict[str, Any]]:
    """Are all of ``node``'s RoCE ports UP with a healthy net_health, by the latest sample?"""
    latest = NodeLatest.objects.filter(node=node).first()
    ports = ((latest.data or {}).get("roce") or []) if latest else []
    bad = [
        {"npu": p.get("npu"), "link": p.get("link"), "net_health": p.get("net_health")}
        for p in ports
        if p.get("link") != "UP"
        or str(p.get("net_health") or "").lower() not in ROCE_OK_HEALTH
    ]
    ok = bool(ports) and not bad
    return ok, {
        "roce_ports": len(ports),
        "roce_bad": bad,
        "sampled_at": latest.ts.isoformat() if latest else None,
    }


def _precondition(incident: Incident) -> tuple[str, dict[str, Any]] | None:
    """(why not, evidence) when the remedy cannot work; None when it may go ahead."""
    node, cluster = incident.node, incident.cluster
    assert cluster is not None  # guardrails refused cluster-less alerts
    if incident.action == RemediationAction.FAILOVER:
        if node is None:
            return "failover needs a node-scoped alert", {}
        if node.link_mode == LinkMode.ROCE:
            _set(incident, action=RemediationAction.REPLACE)
            _note(
                incident,
                "next",
                f"{node.name} already runs on RoCE and still loses packets: moving to the second remedy",
            )
            return _precondition(incident)
        ok, evidence = roce_evidence(node)
        if not ok:
            ports = (
                ", ".join(
                    f"NPU {p['npu']}: link {p['link']}, net_health {p['net_health']}"
                    for p in evidence["roce_bad"]
                )
                or "no RoCE sample"
            )
            return (
                f"{node.name} loses HCCS packets but its RoCE ports are not healthy ({ports}): no failover restart",
                evidence,
            )
    if incident.action == RemediationAction.REPLACE:
        if node is None:
            return "replacement needs a node-scoped alert", {}
        if spare_for(node) is None:
            return (
                f"no idle spare with {node.npu_count} × {node.npu_model} ({node.hbm_per_npu_gb} GB) to replace {node.name}",
                {},
            )
    if incident.action == RemediationAction.RESTART:
        window = timezone.now() - timedelta(
            seconds=settings.REMEDIATION_RESTART_WINDOW_S
        )
        tries = (
            Operation.objects.filter(
                cluster=cluster,
                kind=OperationKind.RESTART,
                source="automation",
                created_at__gte=window,
            )
            .exclude(state=OperationState.SUCCEEDED)
            .count()
        )
        if tries >= settings.REMEDIATION_RESTART_MAX_ATTEMPTS:
            return (
                f"{tries} automatic restarts of {cluster.name} failed in the last {settings.REMEDIATION_RESTART_WINDOW_S} s: not trying again",
                {"failed_restarts": tries},
            )
    if incident.action == RemediationAction.SCALE_OUT and standby_for(cluster) is None:
        return (
            f"no stopped standby cluster serves {cluster.profile.served_model_name}",
            {},
        )
    return None


# -- acting -------------------------------------------------------------------------------


def _execute(incident: Incident, *, user: Any = None) -> Operation | None:
    """Start the operation for the incident's current action; records it, or escalates on refusal."""
    cluster, node = incident.cluster, incident.node
    assert cluster is not None
    kind = _OPERATION_OF_ACTION[RemediationAction(incident.action)]
    target = cluster
    # "remedy": the runbook keeps the dead engine's evidence before it restarts anything
    params: dict[str, Any] = {"remedy": True}
    if incident.action == RemediationAction.FAILOVER and node is not None:
        # the same HCCL_INTRA_* pair on every rank: vllm-ascend reads it in each rank
        # (engine.plans.LINK_PAIR_REASON); the lossy node's switch is the one verified
        params.update(
            link_modes={n.name: LinkMode.ROCE.value for n in cluster.ranked_nodes()},
            verify_node=node.name,
        )
    elif incident.action == RemediationAction.REPLACE and node is not None:
        params.update(node=node.name)
        if incident.alert.rule.metric == "node.hccs_loss_pct":
            # a link fault: the runbook records which links fail, for re-admission
            params.update(record_links=True)
    elif incident.action == RemediationAction.SCALE_OUT:
        standby = standby_for(cluster)
        if standby is None:
            _escalate(
                incident,
                f"no stopped standby cluster serves {cluster.profile.served_model_name}",
            )
            return None
        target = standby
        params.update(scale_out_of=cluster.name)
    reason = f"incident #{incident.pk}: {incident.alert.message}"[:500]
    try:
        # one transaction: the worker picks the operation up only once it is linked
        with transaction.atomic():
            op = operation_start(
                cluster=target,
                kind=kind,
                user=user,
                actor="remediation",
                source="automation" if user is None else "ui",
                reason=reason,
                params=params,
            )
            _set(
                incident,
                state=IncidentState.RUNNING,
                attempts=incident.attempts + 1,
                operation=op,
                operation_ids=[*incident.operation_ids, op.pk],
                summary=f"operation #{op.pk} ({kind} on {target.name}) started",
            )
    except (OperationConflict, OperationRefused) as exc:
        _escalate(incident, f"could not start {kind} on {target.name}: {exc}")
        return None
    _note(
        incident,
        "operation",
        f"operation #{op.pk}: {kind} on {target.name}",
        operation=op.pk,
        attempt=incident.attempts,
    )
    return op


def _awaiting_approval(pk: int) -> Incident:
    """The incident, locked; RemediationRefused unless it still awaits an operator."""
    incident = incident_lock(pk=pk)
    if incident is None or incident.state != IncidentState.AWAITING_APPROVAL:
        state = incident.state if incident is not None else "gone"
        raise RemediationRefused(f"incident #{pk} is {state}, not awaiting approval")
    return incident


def incident_approve(*, incident: Incident, user: Any) -> Operation | None:
    """An operator approves an ``ask`` incident: guardrails again, then act. Raises RemediationRefused."""
    with transaction.atomic():
        incident = _awaiting_approval(incident.pk)
        _set(
            incident,
            approved_by=user,
            approved_at=timezone.now(),
            state=IncidentState.SCHEDULED,
        )
        reason = _guardrail(incident, now=timezone.now())
        if reason:
            _set(incident, state=IncidentState.AWAITING_APPROVAL)
            raise RemediationRefused(reason)
        problem = _precondition(incident)
        if problem:
            _escalate(incident, problem[0], **problem[1])
            return None
        _note(
            incident,
            "approve",
            f"approved by {user.username}: {_describe(incident)}",
            actor=user,
        )
        return _execute(incident, user=user)


def incident_reject(*, incident: Incident, user: Any) -> Incident:
    """An operator declines an ``ask`` incident (the alert stays)."""
    with transaction.atomic():
        incident = _awaiting_approval(incident.pk)
        _set(
            incident,
            state=IncidentState.REJECTED,
            summary=f"rejected by {user.username}",
        )
        _note(incident, "reject", f"rejected by {user.username}", actor=user)
    return incident

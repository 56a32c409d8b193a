"""Alert-driven remediation end to end: real control worker, real node agents and sim engines, real Redis.

Faults go in through the sim's fault interface; collect rounds run as the beat would run
them; the control worker evaluates, decides and runs the operations.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from console.engine_auth import engine_headers
from console.models import Cluster, ClusterState, Node, NodeRole, NodeState
from console.models.operations import Operation, OperationState
from console.services.agents import agent_call
from console.services.operations import operation_start
from engine.sim.state import load_config, node_dir, save_config
from monitoring.models import (
    Alert,
    AlertEvent,
    AlertRule,
    Incident,
    IncidentState,
)
from monitoring.tasks import collect_round_task
from tests.agents import agents, control_worker
from tests.alerts.test_end_to_end import Traffic
from tests.factories import free_port, make_cluster, make_user
from tests.integration.test_operations import FAST, wait_op

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CONTROL_ENV = {
    "WARMUP_REQUESTS": "8",
    "ENGINE_HEALTH_TIMEOUT_S": "60",
    "DRAIN_TIMEOUT_S": "2",
    "OPERATION_HEARTBEAT_S": "1",
    "FAILOVER_VERIFY_MS": "1500",
    "REMEDIATION_RESTART_BACKOFF_MS": "500",
    "REMEDIATION_RESTART_MAX_ATTEMPTS": "2",
}


def add_spare(name: str, like: Node) -> Node:
    return Node.objects.create(
        name=name,
        hostname=name,
        management_ip="127.0.2.9",
        npu_ips=[f"127.20.9.{i + 1}" for i in range(8)],
        role=NodeRole.SPARE,
        api_port=free_port(),
        rpc_port=free_port(),
        driver=Node.Driver.SIM,
        npu_model=like.npu_model,
        npu_count=like.npu_count,
        hbm_per_npu_gb=like.hbm_per_npu_gb,
        state=NodeState.READY,
    )


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Cluster, Path]]:
    """The 4-node sim cluster (plus an idle spare) with agents and a control worker, started."""
    cluster = make_cluster("rem", nodes=4, free_ports=True)
    nodes = cluster.ranked_nodes()
    spare = add_spare("rem-spare", nodes[0])
    env = {**FAST, "SIM_STATE_DIR": str(tmp_path)}
    names = [n.name for n in nodes] + [spare.name]
    ips = {n.name: n.npu_ips for n in [*nodes, spare]}
    with agents(names, extra_env=env, npu_ips=ips), control_worker(CONTROL_ENV):
        op = wait_op(
            operation_start(
                cluster=cluster, kind="start", user=make_user("ops", "operator")
            )
        )
        assert op.state == OperationState.SUCCEEDED, op.error
        cluster.refresh_from_db()
        yield cluster, tmp_path


def head_url(cluster: Cluster) -> str:
    head = cluster.ranked_nodes()[0]
    return f"http://{head.management_ip}:{head.api_port}/v1/completions"


def rounds_until(
    predicate: Callable[[], Any],
    *,
    rounds: int,
    gap_s: float = 0.6,
    settle_s: float = 8.0,
) -> tuple[Any, int]:
    """Run collect rounds (as beat does) until ``predicate`` holds; returns (value, rounds used)."""
    for i in range(1, rounds + 1):
        time.sleep(gap_s)  # traffic (and lost packets) accumulate between polls
        collect_round_task()
        deadline = time.monotonic() + settle_s  # evaluation runs on the control worker
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value, i
            time.sleep(0.2)
    raise AssertionError(f"condition not met after {rounds} rounds")


def incident_of(alert: Alert, timeout: float = 60) -> Incident:
    """The incident acting on ``alert``: its own, or the one it joined (a crashed head can
    fire "Engine health failing" in the same round, and the first alert decided opens
    the restart incident; the other joins it). The decision commits after the alert
    fires (the control worker decides in its own transaction): wait for it."""
    deadline = time.monotonic() + timeout
    while True:
        own = Incident.objects.filter(alert=alert).first()
        if own is not None:
            return own
        joined = AlertEvent.objects.filter(alert=alert, data__decision="join").first()
        if joined is not None:
            return Incident.objects.get(pk=joined.data["incident"])
        assert time.monotonic() < deadline, (
            f"alert #{alert.pk} has no incident: {timeline(alert)}"
        )
        time.sleep(0.2)


def wait_incident(pk: int, states: tuple[str, ...], timeout: float = 150) -> Incident:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        incident = Incident.objects.get(pk=pk)
        if incident.state in states:
            return incident
        time.sleep(0.3)
    incident = Incident.objects.get(pk=pk)
    raise AssertionError(
        f"incident #{pk} is {incident.state} ({incident.summary}) after {timeout}s"
    )


def engine_env(state_dir: Path, node: Node) -> dict[str, str]:
    for proc in psutil.process_iter(["cmdline", "environ"]):
        try:
            env = proc.info["environ"] or {}
            if (
                "engine.sim.vllm" in " ".join(proc.info["cmdline"] or [])
                and env.get("SIM_STATE_DIR") == str(state_dir)
                and env.get("SIM_NODE") == node.name
            ):
                return dict(env)
        except (psutil.Error, TypeError):
            continue
    raise AssertionError(f"no sim engine process for {node.name}")


def timeline(alert: Alert) -> list[str]:
    return [e.data.get("decision", e.kind) for e in alert.events.all()]


def inject_hccs_loss(node: Node, cluster: Cluster) -> tuple[Alert, int]:
    with Traffic(
        head_url(cluster),
        model=cluster.profile.served_model_name,
        headers=engine_headers(cluster.name),
    ):
        collect_round_task()  # baseline counters
        agent_call(node, "sim.inject", fault="hccs-loss", value="20")
        return rounds_until(
            lambda: Alert.objects.filter(
                rule__name="HCCS link loss", target=node.name, state="firing"
            ).first(),
            rounds=2,
        )


BOX16 = "atlas-200t-a2-box16"


def as_server_model(
    cluster: Cluster, state_dir: Path, names: list[str], model: str
) -> None:
    """Make the sim nodes ``names`` that server model, and let a preflight detect it."""
    for name in names:
        d = node_dir(name, base=state_dir)
        cfg = load_config(d)
        cfg.server_model = model
        save_config(d, cfg)
    # A serving cluster refuses preflight (its own engines would read as faults); this
    # helper only needs the model detection, so it lets the checks run as if stopped.
    state = Cluster.objects.get(pk=cluster.pk).state
    Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.STOPPED)
    try:
        wait_op(
            operation_start(
                cluster=cluster, kind="preflight", user=make_user("pre", "operator")
            )
        )
    finally:
        Cluster.objects.filter(pk=cluster.pk).update(state=state)
    for node in cluster.ranked_nodes():  # detected from the sim's dmidecode / npu-smi
        assert node.detected_server_model == model, node.name


def remedy_notes(alert: Alert) -> list[AlertEvent]:
    return [e for e in alert.events.all() if e.data.get("decision") == "remedy"]


def test_on_a_box16_hccs_loss_fails_over_every_rank_to_roce_verifies_and_resolves(
    running: tuple[Cluster, Path],
) -> None:
    cluster, state_dir = running
    node = cluster.ranked_nodes()[2]
    names = [n.name for n in cluster.ranked_nodes()]
    # a Box16 (two HCCS modules) honours HCCL_INTRA_ROCE_ENABLE; the demo's 800T A2 does not
    as_server_model(cluster, state_dir, names, BOX16)
    alert, rounds = inject_hccs_loss(node, cluster)
    assert rounds <= 2  # within 2 poll intervals of the fault
    incident = Incident.objects.get(alert=alert)
    incident = wait_incident(
        incident.pk, (IncidentState.RECOVERED, IncidentState.ESCALATED)
    )
    assert incident.state == IncidentState.RECOVERED, incident.summary
    chose = remedy_notes(alert)
    assert chose and chose[0].data["chosen"] == "roce_failover"
    assert chose[0].data["server_model"] == BOX16
    op = Operation.objects.get(pk=incident.operation_ids[0])
    # the same HCCL_INTRA_* pair on every rank (vllm-ascend reads it in each rank)
    assert op.kind == "failover" and op.source == "automation"
    assert op.params["link_modes"] == {name: "roce" for name in names}
    started = [
        s.data["started_at"]
        for s in op.steps.filter(name__startswith="Start rank").order_by("seq")
    ]
    assert len(started) == 4 and started == sorted(
        started
    )  # rank order, agent-side clocks
    baseline = op.steps.get(name__startswith="Baseline the HCCS rate")
    assert baseline.seq < op.steps.filter(name__startswith="Stop").first().seq
    for each in cluster.ranked_nodes():
        assert each.link_mode == "roce" and each.link_mode_since is not None
        env = engine_env(state_dir, each)
        assert (env["HCCL_INTRA_PCIE_ENABLE"], env["HCCL_INTRA_ROCE_ENABLE"]) == (
            "0",
            "1",
        ), each.name
    node.refresh_from_db()
    assert "incident" in node.link_mode_reason
    assert agent_call(cluster.ranked_nodes()[0], "engine.status")["health"] == 200
    verdict = incident.verification
    assert verdict["ok"] is True and verdict["status"] == "switched", verdict
    assert verdict["evidence"]["hccs_pps_before"] > 0
    assert verdict["evidence"]["hccs_share_of_baseline"] <= 0.05
    with Traffic(
        head_url(cluster),
        model=cluster.profile.served_model_name,
        headers=engine_headers(cluster.name),
    ):
        collect_round_task()
        rounds_until(
            lambda: Alert.objects.get(pk=alert.pk).state == "resolved", rounds=3
        )
    incident.refresh_from_db()
    assert incident.fault_onset_at <= incident.detected_at <= incident.decided_at  # type: ignore[operator]
    assert (
        incident.operation_started_at and incident.healthy_at and incident.resolved_at
    )
    assert incident.operation_started_at <= incident.healthy_at <= incident.resolved_at
    assert incident.mttr_s is not None and incident.mttr_s > 0
    # the restart idled HCCS but did not clear the alert early: it resolved once, after recovery
    resolved = list(alert.events.filter(kind="resolved"))
    assert len(resolved) == 1 and resolved[0].at >= incident.healthy_at
    assert {"remedy", "act", "operation", "verify", "recovered", "resolved"} <= set(
        timeline(alert)
    )
    cluster.refresh_from_db()
    assert cluster.state == ClusterState.RUNNING


def test_on_an_800t_a2_hccs_loss_replaces_the_node_by_the_spare_without_a_roce_switch(
    running: tuple[Cluster, Path],
) -> None:
    cluster, state_dir = running
    # the start's preflight detected the sim's default, the demo's Atlas 800T A2
    assert {n.detected_server_model for n in cluster.ranked_nodes()} == {
        "atlas-800t-a2"
    }
    node = cluster.ranked_nodes()[2]
    alert, _ = inject_hccs_loss(node, cluster)
    incident = wait_incident(
        Incident.objects.get(alert=alert).pk,
        (IncidentState.RECOVERED, IncidentState.ESCALATED),
        timeout=240,
    )
    assert incident.state == IncidentState.RECOVERED, incident.summary
    assert incident.action == "replace" and incident.verification == {}
    # no RoCE switch attempted: one operation, a replace, and no node ever on RoCE
    assert not Operation.objects.filter(cluster=cluster, kind="failover").exists()
    (replace,) = (Operation.objects.get(pk=pk) for pk in incident.operation_ids)
    assert replace.kind == "replace" and replace.state == OperationState.SUCCEEDED
    # the incident says why, before anything restarted, citing the HCCL source
    chose = remedy_notes(alert)
    assert chose and chose[0].data["chosen"] == "replace_with_spare"
    assert chose[0].at <= replace.created_at
    said = chose[0].message
    assert "Not run: roce_failover (can work here: no; source: hicann/hccl" in said
    assert "HCCL_INTRA_ROCE_ENABLE.md" in said and "Atlas 800T A2" in said
    assert "Atlas 800T A2" in chose[0].data["statement"]
    assert replace.result["replace"] == {
        "old": node.name,
        "spare": "rem-spare",
        "rank": 2,
    }
    spare_check = replace.steps.get(name="Preflight on the spare rem-spare")
    assert (
        spare_check.state == "succeeded"
        and spare_check.seq < replace.steps.get(name__startswith="Swap").seq
    )
    node.refresh_from_db()
    spare = Node.objects.get(name="rem-spare")
    assert spare.detected_server_model == "atlas-800t-a2"  # checked before the swap
    assert node.state == NodeState.OUT_OF_SERVICE and node.cluster_id is None
    assert spare.cluster_id == cluster.pk and spare.rank == 2
    # the links that lost packets, measured under traffic before the stop, are kept
    # for re-admission (every HCCS link of the sim node loses the injected 20 %)
    recorded = replace.steps.get(name=f"Record the failing HCCS links of {node.name}")
    assert recorded.state == "succeeded", recorded.summary
    assert all(
        recorded.seq < s.seq
        for s in replace.steps.filter(name__startswith="Stop first")
    )
    assert node.failed_links and all(len(link) == 3 for link in node.failed_links)
    assert node.failed_links_evidence["operation"] == replace.pk
    started = [
        s.data["started_at"]
        for s in replace.steps.filter(name__startswith="Start rank").order_by("seq")
    ]
    assert len(started) == 4 and started == sorted(started)  # rank order
    assert {n.link_mode for n in cluster.ranked_nodes()} == {"hccs"}
    assert agent_call(cluster.ranked_nodes()[0], "engine.status")["health"] == 200
    assert engine_env(state_dir, spare)["HCCL_INTRA_ROCE_ENABLE"] == "0"
    alert.refresh_from_db()
    assert alert.state == "resolved"  # its target left service
    incident.refresh_from_db()
    assert incident.mttr_s is not None and incident.mttr_s > 0


def test_on_a_box16_with_hccs_counters_unsupported_the_verdict_is_cannot_verify_and_the_spare_follows(
    running: tuple[Cluster, Path],
) -> None:
    from monitoring import remediation

    cluster, state_dir = running
    node = cluster.ranked_nodes()[2]
    names = [n.name for n in cluster.ranked_nodes()]
    as_server_model(cluster, state_dir, [*names, "rem-spare"], BOX16)
    AlertRule.objects.filter(name="HCCS link loss").update(remediation_policy="ask")
    alert, _ = inject_hccs_loss(node, cluster)
    incident = wait_incident(
        Incident.objects.get(alert=alert).pk, (IncidentState.AWAITING_APPROVAL,)
    )
    assert incident.action == "failover"
    # the counters the verdict needs go away (an old driver without npu-smi -t hccs)
    agent_call(node, "sim.inject", fault="hccs-unsupported")
    with Traffic(
        head_url(cluster),
        model=cluster.profile.served_model_name,
        headers=engine_headers(cluster.name),
    ):
        remediation.incident_approve(
            incident=incident, user=make_user("olga", "operator")
        )
        incident = wait_incident(
            incident.pk,
            (IncidentState.RECOVERED, IncidentState.ESCALATED),
            timeout=240,
        )
    assert incident.state == IncidentState.RECOVERED, incident.summary
    verdict = incident.verification
    assert verdict["status"] == "cannot_verify" and verdict["ok"] is False, verdict
    said = [e.message for e in alert.events.all() if e.data.get("decision") == "verify"]
    assert said and "cannot be verified" in said[0] and "next remedy" in said[0]
    failover, replace = (Operation.objects.get(pk=pk) for pk in incident.operation_ids)
    assert failover.kind == "failover" and failover.state == OperationState.SUCCEEDED
    step = failover.steps.get(name__startswith="Verify the switch")
    assert step.state == "warning"  # never a pass
    assert replace.kind == "replace" and replace.state == OperationState.SUCCEEDED
    assert incident.action == "replace"
    chose = remedy_notes(alert)
    assert [e.data["chosen"] for e in chose] == ["roce_failover", "replace_with_spare"]
    spare = Node.objects.get(name="rem-spare")
    assert spare.cluster_id == cluster.pk and spare.rank == 2
    # the spare joins with the engine's pair: every rank still on RoCE
    assert {n.link_mode for n in cluster.ranked_nodes()} == {"roce"}
    assert engine_env(state_dir, spare)["HCCL_INTRA_ROCE_ENABLE"] == "1"


def test_hccs_loss_with_a_roce_port_down_escalates_without_restarting(
    running: tuple[Cluster, Path],
) -> None:
    cluster, state_dir = running
    node = cluster.ranked_nodes()[2]
    # a Box16 with no spare: the RoCE failover is the only remedy, and its ports are down
    as_server_model(cluster, state_dir, [n.name for n in cluster.ranked_nodes()], BOX16)
    Node.objects.filter(name="rem-spare").delete()
    agent_call(node, "sim.inject", fault="roce-down")
    alert, _ = inject_hccs_loss(node, cluster)
    incident = wait_incident(
        Incident.objects.get(alert=alert).pk,
        (IncidentState.ESCALATED, IncidentState.RUNNING),
    )
    assert incident.state == IncidentState.ESCALATED and incident.operation_ids == []
    assert "RoCE ports are not healthy" in incident.summary
    alert.refresh_from_db()
    assert alert.severity == "critical" and alert.message.startswith("ESCALATED")
    assert not Operation.objects.filter(cluster=cluster, kind="failover").exists()
    events = [e for e in alert.events.all() if e.data.get("decision") == "escalate"]
    assert events and events[0].data["roce_bad"]  # the evidence: which ports
    node.refresh_from_db()
    assert node.link_mode == "hccs"


def test_on_a_box16_with_a_roce_port_down_the_spare_is_the_next_remedy(
    running: tuple[Cluster, Path],
) -> None:
    cluster, state_dir = running
    node = cluster.ranked_nodes()[2]
    names = [n.name for n in cluster.ranked_nodes()]
    as_server_model(cluster, state_dir, [*names, "rem-spare"], BOX16)
    agent_call(node, "sim.inject", fault="roce-down")
    alert, _ = inject_hccs_loss(node, cluster)
    incident = wait_incident(
        Incident.objects.get(alert=alert).pk,
        (IncidentState.RECOVERED, IncidentState.ESCALATED),
        timeout=240,
    )
    assert incident.state == IncidentState.RECOVERED, incident.summary
    assert not Operation.objects.filter(cluster=cluster, kind="failover").exists()
    (replace,) = (Operation.objects.get(pk=pk) for pk in incident.operation_ids)
    assert replace.kind == "replace" and replace.state == OperationState.SUCCEEDED
    nxt = [e for e in alert.events.all() if e.data.get("decision") == "next"]
    assert nxt and "RoCE ports are not healthy" in nxt[0].message
    assert nxt[0].data["roce_bad"]  # the evidence: which ports
    chose = remedy_notes(alert)
    assert [e.data["chosen"] for e in chose] == ["roce_failover", "replace_with_spare"]
    assert {n.link_mode for n in cluster.ranked_nodes()} == {"hccs"}


def test_a_crashed_head_restarts_with_backoff_and_a_crash_loop_escalates(
    running: tuple[Cluster, Path],
) -> None:
    cluster, _ = running
    head = cluster.ranked_nodes()[0]
    agent_call(
        head, "sim.inject", fault="crash", value="once"
    )  # kills it now; the next start fails once too
    alert, _ = rounds_until(
        lambda: Alert.objects.filter(
            rule__name="Engine process failed", target=head.name, state="firing"
        ).first(),
        rounds=3,
    )
    incident = wait_incident(
        incident_of(alert).pk,
        (IncidentState.RECOVERED, IncidentState.ESCALATED),
        timeout=240,
    )
    assert incident.state == IncidentState.RECOVERED, incident.summary
    assert (
        incident.attempts == 2
    )  # the first restart hit the crash, the second came after the backoff
    first, second = (Operation.objects.get(pk=pk) for pk in incident.operation_ids)
    assert (
        first.state == OperationState.FAILED
        and second.state == OperationState.SUCCEEDED
    )
    assert "retry" in timeline(incident.alert)
    assert agent_call(head, "engine.status")["health"] == 200

    rounds_until(lambda: Alert.objects.get(pk=alert.pk).state == "resolved", rounds=3)
    AlertRule.objects.filter(name="Engine process failed").update(
        cooldown_s=0
    )  # the next crash may act at once
    agent_call(head, "sim.inject", fault="crash", value="always")
    loop, _ = rounds_until(
        lambda: (
            Alert.objects.filter(
                rule__name="Engine process failed", target=head.name, state="firing"
            )
            .exclude(pk=alert.pk)
            .first()
        ),
        rounds=3,
    )
    looped = wait_incident(
        incident_of(loop).pk,
        (IncidentState.ESCALATED, IncidentState.RECOVERED),
        timeout=240,
    )
    assert (
        looped.state == IncidentState.ESCALATED and looped.attempts == 2
    )  # REMEDIATION_RESTART_MAX_ATTEMPTS
    assert all(
        Operation.objects.get(pk=pk).state == OperationState.FAILED
        for pk in looped.operation_ids
    )
    escalated = Alert.objects.get(pk=looped.alert_id)  # the incident's own alert
    assert escalated.severity == "critical" and "restarts failed" in escalated.message


def test_hbm_pressure_scales_out_onto_the_standby_which_joins_the_gateway_pool(
    tmp_path: Path,
) -> None:
    from console.gateway.routing import _serving_pool
    from console.services.inventory import DEMO_PROFILES
    from tests.factories import make_profile

    cluster = make_cluster("rem", nodes=4, free_ports=True)
    standby = make_cluster(
        "stb",
        nodes=2,
        free_ports=True,
        profile=make_profile(**{**DEMO_PROFILES["w8a8"], "name": "stb w8a8"}),
    )
    for n in standby.ranked_nodes():  # its own addresses
        n.management_ip, n.npu_ips = (
            f"127.0.3.{n.rank + 1}",
            [f"127.30.{n.rank + 1}.{i + 1}" for i in range(8)],
        )
        n.save()
    Cluster.objects.filter(pk=standby.pk).update(state=ClusterState.STOPPED)
    AlertRule.objects.filter(name="NPU HBM usage high").update(
        remediation_policy="auto", remediation_action="scale_out", for_s=0
    )
    nodes = [*cluster.ranked_nodes(), *standby.ranked_nodes()]
    with (
        agents(
            [n.name for n in nodes],
            extra_env={**FAST, "SIM_STATE_DIR": str(tmp_path)},
            npu_ips={n.name: n.npu_ips for n in nodes},
        ),
        control_worker(CONTROL_ENV),
    ):
        op = wait_op(
            operation_start(
                cluster=cluster, kind="start", user=make_user("ops", "operator")
            )
        )
        assert op.state == OperationState.SUCCEEDED, op.error
        agent_call(
            cluster.ranked_nodes()[1], "sim.inject", fault="hbm-pressure", value="97"
        )
        alert, _ = rounds_until(
            lambda: Alert.objects.filter(
                rule__name="NPU HBM usage high", state="firing"
            ).first(),
            rounds=3,
        )
        incident = wait_incident(
            Incident.objects.filter(action="scale_out").get().pk,
            (IncidentState.RECOVERED, IncidentState.ESCALATED),
        )
        assert incident.state == IncidentState.RECOVERED, incident.summary
        started = Operation.objects.get(pk=incident.operation_ids[0])
        assert (
            started.cluster_id == standby.pk
            and started.kind == "start"
            and started.params["scale_out_of"] == "rem"
        )
        standby.refresh_from_db()
        assert standby.state == ClusterState.RUNNING
        pool = {
            u.cluster_name for u in _serving_pool(cluster.profile.served_model_name)
        }
        assert pool == {"rem", "stb"}  # the gateway now spreads requests over both
        # the other chips' alerts joined the one incident instead of starting more clusters
        assert Incident.objects.filter(action="scale_out").count() == 1


@pytest.fixture
def firing_alert() -> Callable[..., Alert]:
    from django.utils import timezone

    def make(rule_name: str, *, policy: str, node_rank: int = 2) -> Alert:
        cluster = Cluster.objects.filter(name="pol").first() or make_cluster(
            "pol", nodes=4
        )
        Cluster.objects.filter(pk=cluster.pk).update(state=ClusterState.RUNNING)
        node = cluster.ranked_nodes()[node_rank]
        rule = AlertRule.objects.get(name=rule_name)
        AlertRule.objects.filter(pk=rule.pk).update(remediation_policy=policy)
        now = timezone.now()
        return Alert.objects.create(
            rule=rule,
            cluster=cluster,
            node=node,
            target=node.name,
            state="firing",
            severity=rule.severity,
            value=40.0,
            message="test",
            fault_onset_at=now,
            pending_at=now,
            fired_at=now,
        )

    return make


def test_policy_ask_waits_for_an_operator_then_acts(
    firing_alert: Callable[..., Alert],
) -> None:
    from monitoring import remediation

    alert = firing_alert("Requests waiting", policy="ask")
    AlertRule.objects.filter(pk=alert.rule_id).update(remediation_action="restart")
    incident = remediation.alert_firing(alert)
    assert incident is not None and incident.state == IncidentState.AWAITING_APPROVAL
    assert not Operation.objects.filter(
        cluster=alert.cluster
    ).exists()  # nothing until approved
    assert "ask" in timeline(alert)
    operator = make_user("olga", "operator")
    op = remediation.incident_approve(incident=incident, user=operator)
    assert op is not None and op.kind == "restart" and op.requested_by_name == "olga"
    incident.refresh_from_db()
    assert incident.state == IncidentState.RUNNING and incident.approved_by == operator
    with pytest.raises(remediation.RemediationRefused, match="not awaiting approval"):
        remediation.incident_approve(incident=incident, user=operator)


def test_policy_ask_names_the_remedy_it_waits_for_not_the_rules(
    firing_alert: Callable[..., Alert],
) -> None:
    """An 800T A2 has no RoCE switch: the rule's failover becomes the spare's replace, and
    the operator is asked about the replace."""
    from monitoring import remediation

    alert = firing_alert("HCCS link loss", policy="ask")
    assert alert.rule.remediation_action == "failover"
    Node.objects.filter(cluster=alert.cluster).update(
        detected_server_model="atlas-800t-a2"
    )
    add_spare("pol-spare", alert.cluster.ranked_nodes()[0])
    alert.node.refresh_from_db()
    incident = remediation.alert_firing(alert)
    assert incident is not None and incident.state == IncidentState.AWAITING_APPROVAL
    assert incident.action == "replace"
    assert incident.summary == "replace waits for an operator's approval"


def test_maintenance_mode_and_temperature_skip_with_the_reason_recorded(
    firing_alert: Callable[..., Alert],
) -> None:
    from console.models import AuditEvent
    from monitoring import remediation

    alert = firing_alert("HCCS link loss", policy="auto")
    Cluster.objects.filter(pk=alert.cluster_id).update(maintenance_mode=True)
    incident = remediation.alert_firing(alert)
    assert (
        incident is not None
        and incident.state == IncidentState.SKIPPED
        and "maintenance mode" in incident.summary
    )
    assert not Operation.objects.filter(cluster=alert.cluster).exists()
    assert "skip" in timeline(alert)
    assert AuditEvent.objects.filter(action="remediation.skip").exists()

    Cluster.objects.filter(pk=alert.cluster_id).update(maintenance_mode=False)
    hot = firing_alert("NPU temperature high", policy="auto")
    AlertRule.objects.filter(pk=hot.rule_id).update(remediation_action="restart")
    skipped = remediation.alert_firing(hot)
    assert (
        skipped is not None
        and skipped.state == IncidentState.SKIPPED
        and "temperature" in skipped.summary
    )
    assert not Operation.objects.filter(cluster=hot.cluster).exists()


def test_cooldown_and_hourly_cap_refuse_further_automatic_actions(
    firing_alert: Callable[..., Alert], settings: Any
) -> None:
    from django.utils import timezone

    from monitoring import remediation

    first = firing_alert("Engine process failed", policy="auto")
    Incident.objects.create(
        alert=first,
        cluster=first.cluster,
        action="restart",
        policy="auto",
        state=IncidentState.RECOVERED,
        fault_onset_at=timezone.now(),
        detected_at=timezone.now(),
        operation_started_at=timezone.now(),
        attempts=1,
    )
    Alert.objects.filter(pk=first.pk).update(
        state="resolved", resolved_at=timezone.now()
    )
    again = firing_alert("Engine process failed", policy="auto")
    incident = remediation.alert_firing(again)
    assert (
        incident is not None
        and incident.state == IncidentState.SKIPPED
        and incident.summary.startswith("cooldown")
    )

    AlertRule.objects.filter(name="Engine process failed").update(cooldown_s=0)
    settings.REMEDIATION_MAX_ACTIONS_PER_HOUR = 1
    Alert.objects.filter(pk=again.pk).update(
        state="resolved", resolved_at=timezone.now()
    )
    third = firing_alert("Engine process failed", policy="auto")
    capped = remediation.alert_firing(third)
    assert (
        capped is not None
        and capped.state == IncidentState.SKIPPED
        and "in the last hour" in capped.summary
    )


def test_hccs_loss_on_an_800t_a2_without_a_spare_escalates_with_the_options(
    firing_alert: Callable[..., Alert],
) -> None:
    from monitoring import remediation

    alert = firing_alert("HCCS link loss", policy="auto")
    assert alert.cluster is not None
    alert.cluster.nodes.update(detected_server_model="atlas-800t-a2")
    incident = remediation.alert_firing(alert)
    assert incident is not None and incident.state == IncidentState.ESCALATED
    assert not Operation.objects.filter(cluster=alert.cluster).exists()
    alert.refresh_from_db()
    assert alert.severity == "critical" and alert.message.startswith("ESCALATED")
    (event,) = [e for e in alert.events.all() if e.data.get("decision") == "escalate"]
    assert "no remedy that can have an effect is left" in event.message
    assert "Not run: replace_with_spare (can work here: no" in event.message
    assert "Not run: roce_failover (can work here: no; source: hicann/hccl" in (
        event.message
    )
    # the options, each with whether it can work here and why
    assert [r["key"] for r in event.data["remedies"]] == [
        "replace_with_spare",
        "roce_failover",
        "escalate",
    ]
    assert "1. replace_with_spare — can work here: no" in event.data["statement"]


def test_automatic_mode_runs_no_remedy_on_an_unknown_server_model(
    firing_alert: Callable[..., Alert],
) -> None:
    from monitoring import remediation

    alert = firing_alert("HCCS link loss", policy="auto")
    add_spare("pol-spare", alert.node)  # type: ignore[arg-type]
    # never preflighted: whether HCCL honours the switch, and "same model", are unknown
    assert alert.node is not None and alert.node.effective_server_model == "unknown"
    incident = remediation.alert_firing(alert)
    assert incident is not None and incident.state == IncidentState.ESCALATED
    assert not Operation.objects.filter(cluster=alert.cluster).exists()
    assert "(can work here: unknown" in incident.summary


def _roce(pkts: int) -> list[dict[str, Any]]:
    return [{"npu": 0, "stat": {"roce_tx_all_pkt_num": pkts}}]


def _hccs(tx: int) -> list[dict[str, Any]]:
    return [{"npu": 0, "chip": 0, "links": [{"index": 0, "tx_packets": tx}]}]


def test_no_code_path_marks_a_link_switch_verified_from_zero_hccs_samples() -> None:
    """Every way a window can hold no HCCS sample, while RoCE counters grow fast and
    peers are busy (what fooled the old check): never a pass, always 'cannot verify'."""
    from console.services.runbooks.remedies import NO_BASELINE
    from engine.link_verify import CANNOT_VERIFY, verify_link_switch

    def w(t0: float, hccs: Any, roce: int, **extra: Any) -> tuple[dict, dict]:
        a = {"collected_at": t0, "roce": _roce(roce), **extra}
        b = {"collected_at": t0 + 2, "roce": _roce(roce + 10**7), **extra}
        if hccs is not None:
            a["hccs"], b["hccs"] = hccs, hccs
        return a, b

    busy = w(10.0, _hccs(0), 0)
    busy = ({**busy[0], "hccs": _hccs(0)}, {**busy[1], "hccs": _hccs(10**7)})
    zero_windows = [
        w(0.0, None, 0),  # no "hccs" key at all
        w(0.0, [], 0),  # npu-smi answered nothing
        w(0.0, [{"npu": 0, "chip": 0, "links": []}], 0),  # chips but no links
        w(0.0, _hccs(5), 0, hccs_unsupported=True),  # unsupported flag wins
        NO_BASELINE,  # the runbook had no baseline
    ]
    for before in zero_windows:
        for after in zero_windows[:-1]:
            verdict = verify_link_switch(
                before,
                w(
                    10.0,
                    after[0].get("hccs"),
                    0,
                    **{k: v for k, v in after[0].items() if k == "hccs_unsupported"},
                ),
                [busy],
            )
            assert not verdict.ok and verdict.status == CANNOT_VERIFY, (before, after)
            assert verdict.to_dict()["ok"] is False
    # and with a real baseline but zero samples after the change
    real = (
        {"collected_at": 0.0, "hccs": _hccs(0)},
        {"collected_at": 2.0, "hccs": _hccs(10**6)},
    )
    for after in zero_windows[:-1]:
        assert verify_link_switch(real, after, [busy]).status == CANNOT_VERIFY


def test_a_benchmarks_own_load_never_triggers_an_automatic_action(
    firing_alert: Callable[..., Alert],
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from monitoring import remediation

    now = timezone.now()
    alert = firing_alert("Requests waiting", policy="auto")
    AlertRule.objects.filter(pk=alert.rule_id).update(remediation_action="restart")
    bench = Operation.objects.create(
        cluster=alert.cluster,
        kind="benchmark",
        state=OperationState.SUCCEEDED,
        requested_by_name="bea",
        started_at=now - timedelta(minutes=5),
        finished_at=now - timedelta(seconds=30),  # within BENCH_LOAD_GRACE_S
    )
    incident = remediation.alert_firing(alert)
    assert incident is not None and incident.state == IncidentState.SKIPPED
    assert f"benchmark #{bench.pk}" in incident.summary, incident.summary
    assert not Operation.objects.filter(cluster=alert.cluster, kind="restart").exists()

    # the same alert long after the benchmark is a fault again: the restart is queued
    Operation.objects.filter(pk=bench.pk).update(
        started_at=now - timedelta(hours=2), finished_at=now - timedelta(hours=1)
    )
    Alert.objects.filter(pk=alert.pk).update(state="resolved", resolved_at=now)
    Incident.objects.filter(pk=incident.pk).delete()
    later = remediation.alert_firing(firing_alert("Requests waiting", policy="auto"))
    assert later is not None and "benchmark" not in later.summary
    assert Operation.objects.filter(cluster=alert.cluster, kind="restart").exists()

"""Detection and decision latency of alert-driven failover, at 1 s and 5 s poll intervals.

    .venv/bin/python tests/bench/bench_remediation.py [--incidents 20] [--intervals 1,5]

A 2-node sim cluster (W8A8, DP2 × TP8 + EP) runs with real agents, a real control
worker and traffic; rounds are driven at the poll interval as beat would. Each
incident injects 20 % HCCS loss on rank 1 (the rule fires above 15 %) at a random
phase of the interval, and measures

- detection: fault injected → the firing alert reaches the remediation seam
  (``Incident.decided_at``, stamped right after the evaluation that fired commits);
- decision: that → the failover operation picked up by the control worker
  (``Operation.started_at``).

Loss is measured over each round's counter window, so the first window after onset
usually averages below 15 % and the alert fires one round later: detection is about
1–2 intervals. As cross-checks the bench also prints its own 20 ms poll of the firing
and the console's stamps (``Alert.fired_at`` is the start of the round that fired,
``Incident.decision_s`` counts from it).

Once the operation has started the fault is cleared (the failover's restart idles
HCCS, which resolves the alert; a fault left in place re-fires a new alert after the
restart, and that alert joins the still-running incident instead of opening the next
one), and the bench's traffic pauses until the failover ends (the sim's head does not end
in-flight requests on SIGTERM: a stop under traffic waits out the agent's 30 s grace). The
sim honours the RoCE switch while the failover runs, so it verifies and the incident recovers; between incidents it ignores it and the node's link mode is set back
to HCCS, so HCCS carries the traffic that makes the next fault measurable. The rule's
cooldown is 0 and the hourly cap on automatic actions is raised for the bench; the
product's guardrails are otherwise unchanged. The field guide's manual diagnosis took
about 3 minutes; the ratio against it is printed.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import threading
import time
from collections import Counter
from datetime import UTC, datetime

import _env  # noqa: F401  (environment, Redis, database)
import httpx
from django.test import override_settings

from console.engine_auth import engine_headers
from console.models import ClusterState, Node
from console.models.operations import Operation
from console.services.agents import agent_call
from console.services.inventory import DEMO_PROFILES
from console.services.operations import operation_start
from engine.sim.state import load_config, node_dir, save_config
from monitoring.alerts.services import alert_rules_seed
from monitoring.models import (
    INCIDENT_OPEN_STATES,
    Alert,
    AlertEvent,
    AlertRule,
    Incident,
)
from monitoring.tasks import collect_round_task
from tests.agents import agents, control_worker
from tests.alerts.test_end_to_end import Traffic
from tests.factories import make_cluster, make_profile, make_user

MANUAL_S = 180.0  # the field guide: about 3 minutes to find the node by hand


def wait(predicate, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    from monitoring.models import NodeSample

    recent = list(
        NodeSample.objects.order_by("-ts").values_list(
            "node__name", "ts", "hccs_loss_pct", "engine_state"
        )[:8]
    )
    alerts = list(
        Alert.objects.values_list(
            "pk", "rule__name", "target", "state", "fired_at", "resolved_at"
        )
    )
    raise SystemExit(
        f"timed out waiting for {what}; latest samples {recent}; alerts {alerts}\n{dump()}"
    )


def dump() -> str:
    """Incidents, remediation decisions and operations, for a timeout's diagnosis."""
    lines = ["incidents:"]
    lines += [
        f"  {row}"
        for row in Incident.objects.order_by("pk").values_list(
            "pk",
            "alert_id",
            "action",
            "state",
            "summary",
            "operation_ids",
            "operation_started_at",
            "resolved_at",
        )
    ]
    lines.append("remediation events:")
    lines += [
        f"  {row}"
        for row in AlertEvent.objects.filter(kind="remediation")
        .order_by("pk")
        .values_list("alert_id", "at", "message")
    ]
    lines.append("operations:")
    lines += [
        f"  {row}"
        for row in Operation.objects.order_by("pk").values_list(
            "pk",
            "kind",
            "state",
            "created_at",
            "started_at",
            "finished_at",
            "params",
            "error",
        )
    ]
    return "\n".join(lines)


class PausableTraffic(Traffic):
    """Traffic that can be held (``paused`` set) without stopping its threads."""

    def __init__(
        self,
        url: str,
        streams: int = 4,
        model: str = "small",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(url, streams=streams, model=model, headers=headers)
        self.paused = threading.Event()

    def _run(self, url: str) -> None:
        while not self.stop.is_set():
            if self.paused.is_set():
                time.sleep(0.05)
                continue
            try:
                httpx.post(
                    url,
                    json={"model": self.model, "prompt": "hi", "max_tokens": 64},
                    headers=self.headers,
                    timeout=30,
                )
            except httpx.HTTPError:
                time.sleep(0.1)

    def __enter__(self) -> PausableTraffic:
        super().__enter__()
        return self


class Beat:
    """collect_round_task every ``interval`` seconds in a thread, like celery beat."""

    def __init__(self, interval: float) -> None:
        self.interval, self.stop = interval, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        from django.db import connection

        next_at = time.monotonic()
        while not self.stop.is_set():
            collect_round_task()
            next_at += self.interval
            self.stop.wait(max(0.0, next_at - time.monotonic()))
        connection.close()

    def __enter__(self) -> Beat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def run(
    interval: int, incidents: int, state_dir: str, *, slow_steps: bool = False
) -> list[dict[str, object]]:
    profile = make_profile(
        **{**DEMO_PROFILES["w8a8"], "name": f"bench w8a8 {interval}"}
    )
    cluster = make_cluster(f"remb{interval}", nodes=2, profile=profile, free_ports=True)
    # the failover path exists only where HCCL honours the switch (engine/capabilities/servers.py):
    # a Box16 by site override, else the sim's 800T A2 would go straight to a spare
    Node.objects.filter(cluster=cluster).update(
        server_model_override="atlas-200t-a2-box16",
        server_model_override_reason="bench: measures the RoCE failover path",
    )
    nodes = cluster.ranked_nodes()
    target = nodes[1]
    env = {"SIM_TIME_SCALE": "0.05", "SIM_LOAD_S": "0.3", "SIM_STATE_DIR": state_dir}
    control_env = {
        "WARMUP_REQUESTS": "0",
        "DRAIN_TIMEOUT_S": "1",
        # the sim integrates counters every 0.5 s: a shorter window may hold no report at all
        "FAILOVER_VERIFY_MS": "2000",
        "COLLECT_INTERVAL_S": str(interval),
        "ENGINE_HEALTH_TIMEOUT_S": "120",
        # 20 incidents in a few minutes: the hourly cap (default 6 per cluster) would skip the 7th on
        "REMEDIATION_MAX_ACTIONS_PER_HOUR": "1000",
    }
    rows: list[dict[str, object]] = []
    # The rounds run in this process (Beat below): give them what the product derives from
    # COLLECT_INTERVAL_S (console/settings.py), not this process's default 5 s interval.
    collect = override_settings(
        COLLECT_INTERVAL_S=interval,
        COLLECT_DEADLINE_S=max(800, interval * 800) / 1000,
        STALE_AFTER_S=max(15, 3 * interval),
        UNREACHABLE_AFTER_S=max(60, 12 * interval),
    )
    with (
        collect,
        agents(
            [n.name for n in nodes],
            extra_env=env,
            npu_ips={n.name: n.npu_ips for n in nodes},
        ),
        control_worker(control_env),
    ):
        d = node_dir(target.name, base=state_dir)

        def set_honours(
            value: bool,
        ) -> None:  # read by the sim engine on every report, no restart needed
            cfg = load_config(d)
            cfg.honours_roce_switch = value
            save_config(d, cfg)

        set_honours(False)
        op = operation_start(
            cluster=cluster,
            kind="start",
            user=make_user(f"bench{interval}", "operator"),
        )
        wait(lambda: Operation.objects.get(pk=op.pk).finished_at, 180, "the start")
        head = cluster.ranked_nodes()[0]
        url = f"http://{head.management_ip}:{head.api_port}/v1/completions"
        with (
            PausableTraffic(
                url,
                model=profile.served_model_name,
                headers=engine_headers(cluster.name),
            ) as traffic,
            Beat(interval),
        ):
            time.sleep(2 * interval)  # baseline counters
            last_alert = 0
            for i in range(incidents):
                time.sleep(random.uniform(0, interval))  # a random phase of the poll
                onset = datetime.now(UTC)
                agent_call(target, "sim.inject", fault="hccs-loss", value="20")
                alert = wait(
                    lambda after=last_alert: Alert.objects.filter(
                        rule__name="HCCS link loss",
                        target=target.name,
                        state="firing",
                        pk__gt=after,
                    ).first(),
                    20 * interval + 30,
                    "the alert",
                )
                seen = datetime.now(UTC)  # the firing is committed (polled every 20 ms)
                last_alert = alert.pk
                incident = wait(
                    lambda a=alert: Incident.objects.filter(alert=a).first(),
                    30,
                    "the decision",
                )
                first_op = wait(
                    lambda pk=incident.pk: Operation.objects.filter(
                        params__incident=pk, started_at__isnull=False
                    ).first(),
                    60,
                    "the operation",
                )
                # Measured. Clear the fault now: the failover's restart idles HCCS, which resolves the alert
                # (0 % of nothing); a fault left in place re-fires a new alert when the engines come back,
                # and that alert joins this still-running incident instead of opening the next one.
                agent_call(target, "sim.clear")
                # the switch takes: the failover verifies and the incident recovers
                set_honours(True)
                # No bench traffic while the failover runs (the verification sends its own): the
                # sim's head does not end in-flight requests on SIGTERM, so a stop under traffic
                # waits out the agent's 30 s grace and is killed.
                traffic.paused.set()
                wait(
                    lambda: (
                        not Operation.objects.filter(
                            cluster=cluster, finished_at__isnull=True
                        ).exists()
                    ),
                    180,
                    "the failover",
                )
                set_honours(False)
                traffic.paused.clear()
                # operation_finished moves the incident on right after the operation ends; an incident
                # still open would be joined by the next alert instead of opening a new one
                wait(
                    lambda pk=incident.pk: (
                        Incident.objects.filter(pk=pk)
                        .exclude(state__in=INCIDENT_OPEN_STATES)
                        .exists()
                    ),
                    30,
                    "the incident to close",
                )
                wait(
                    lambda pk=alert.pk: Alert.objects.get(pk=pk).state == "resolved",
                    20 * interval + 30,
                    "the resolve",
                )
                incident.refresh_from_db()
                alert.refresh_from_db()
                # the failover put every rank on RoCE (one HCCL_INTRA_* pair per engine)
                Node.objects.filter(cluster=cluster).update(link_mode="hccs")
                cluster.refresh_from_db()
                if cluster.state != ClusterState.RUNNING:
                    raise SystemExit(
                        f"incident {i + 1}: the cluster is {cluster.state}\n{dump()}"
                    )
                decided = incident.decided_at
                row = {
                    "detection": (
                        decided - onset
                    ).total_seconds(),  # injected → firing alert reaches the seam
                    "decision": (
                        first_op.started_at - decided
                    ).total_seconds(),  # → the operation picked up
                    "seen": (
                        seen - onset
                    ).total_seconds(),  # the bench's own 20 ms poll of the firing
                    "stamp_detection": (
                        alert.fired_at - onset
                    ).total_seconds(),  # product stamps (fired_at = round start)
                    "stamp_decision": incident.decision_s,
                    "outcome": incident.state,
                }
                first_op.refresh_from_db()
                row["failover"] = (
                    first_op.finished_at - first_op.started_at
                ).total_seconds()
                rows.append(row)
                if slow_steps:
                    for st in first_op.steps.all():
                        if (
                            st.started_at
                            and st.finished_at
                            and (st.finished_at - st.started_at).total_seconds() > 2
                        ):
                            print(
                                f"    slow step: {st.name} {(st.finished_at - st.started_at).total_seconds():.1f} s: {st.summary}"
                            )
                print(
                    f"  interval {interval} s, incident {i + 1}/{incidents}: detection {row['detection']:.2f} s, "
                    f"decision {row['decision']:.3f} s (failover {row['failover']:.1f} s, incident {row['outcome']})",
                    flush=True,
                )
                if incident.state != "recovered":  # say why, from the alert's timeline
                    for at, message in AlertEvent.objects.filter(
                        kind="remediation", data__incident=incident.pk
                    ).values_list("at", "message"):
                        print(f"    {at:%H:%M:%S.%f}: {message}")
    # This cluster's agents are gone: out of the inventory, or the next interval's rounds
    # would wait their whole deadline for its nodes every time.
    Node.objects.filter(cluster=cluster).delete()
    cluster.delete()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--incidents", type=int, default=20, help="incidents per interval (default 20)"
    )
    parser.add_argument(
        "--intervals",
        default="1,5",
        help="poll intervals in seconds, comma-separated (default 1,5)",
    )
    parser.add_argument(
        "--slow-steps",
        action="store_true",
        help="print the failover steps that took over 2 s",
    )
    args = parser.parse_args()
    t0 = time.monotonic()
    alert_rules_seed()
    AlertRule.objects.filter(name="HCCS link loss").update(
        cooldown_s=0, remediation_policy="auto", remediation_action="failover"
    )
    results = {}
    for interval in (int(x) for x in args.intervals.split(",")):
        results[interval] = run(
            interval,
            args.incidents,
            os.path.join(_env.VAR, "sim", str(interval)),
            slow_steps=args.slow_steps,
        )
    p = _env.percentile
    print(
        f"\n{args.incidents} injected HCCS-loss incidents per interval (20 % on rank 1 vs a 15 % threshold, auto failover),"
        " 2-node W8A8 sim."
    )
    print(
        "detection = fault injected -> the firing alert reaches the remediation seam (Incident.decided_at, right after the"
    )
    print(
        "            evaluation commits); decision = that -> the failover Operation.started_at (picked up by the control worker)."
    )
    print(
        f"manual reference: about {MANUAL_S:.0f} s to find the node by hand (field guide), before any action.\n"
    )
    print(
        f"{'interval':>8} | {'detection p50':>13} {'p95':>7} | {'decision p50':>12} {'p95':>7} | {'total p50':>9} {'p95':>7} | vs manual ~{MANUAL_S:.0f} s"
    )
    for interval, rows in results.items():
        det = [float(r["detection"]) for r in rows]  # type: ignore[arg-type]
        dec = [float(r["decision"]) for r in rows]  # type: ignore[arg-type]
        tot = [a + b for a, b in zip(det, dec, strict=True)]
        print(
            f"{interval:>6} s | {p(det, 0.5):>11.2f} s {p(det, 0.95):>5.2f} s | {p(dec, 0.5):>10.3f} s {p(dec, 0.95):>5.3f} s"
            f" | {p(tot, 0.5):>7.2f} s {p(tot, 0.95):>5.2f} s | {p(tot, 0.5) / MANUAL_S:.1%} of it ({MANUAL_S / p(tot, 0.5):,.0f}x faster)"
        )
    print("\ncross-checks (p50 / p95):")
    for interval, rows in results.items():
        seen = [float(r["seen"]) for r in rows]  # type: ignore[arg-type]
        sdet = [float(r["stamp_detection"]) for r in rows]  # type: ignore[arg-type]
        sdec = [
            float(r["stamp_decision"]) for r in rows if r["stamp_decision"] is not None
        ] or [float("nan")]  # type: ignore[arg-type]
        fo = [float(r["failover"]) for r in rows]  # type: ignore[arg-type]
        outcomes = [
            f"{n} {k}"
            for k, n in Counter(str(r["outcome"]) for r in rows).most_common()
        ]
        print(
            f"  {interval} s: injected -> firing seen by the bench's 20 ms poll {p(seen, 0.5):.2f} / {p(seen, 0.95):.2f} s;"
            f" console stamps (Alert.fired_at is the round's start): detection {p(sdet, 0.5):.2f} / {p(sdet, 0.95):.2f} s,"
            f" Incident.decision_s {p(sdec, 0.5):.2f} / {p(sdec, 0.95):.2f} s;"
            f" failover operation {p(fo, 0.5):.1f} / {p(fo, 0.95):.1f} s; incidents {', '.join(outcomes)}"
        )
    print(f"\ntotal {time.monotonic() - t0:.0f} s", flush=True)
    gc.collect()  # drop finished AsyncResults while Redis still runs (atexit stops it; else 20 s of reconnects)


if __name__ == "__main__":
    main()

"""Detection and decision latency of alert-driven failover, at 1 s and 5 s poll intervals.

    .venv/bin/python tests/bench/bench_remediation.py [--incidents 20] [--intervals 1,5]

A 2-node sim cluster (W8A8, DP2 × TP8 + EP) runs with real agents, a real control
worker and traffic; rounds are driven at the poll interval as beat would. Each
incident injects 20 % HCCS loss on rank 1 at a random phase of the interval, and
measures

- detection: fault injected → the alert is firing in the database (polled every 20 ms);
- decision: alert firing → the failover operation picked up by the control worker
  (``Operation.started_at``), the same 20 ms resolution.

Between incidents the fault is cleared, the alert resolves and the node's link mode is
set back to HCCS (the sim is set to ignore the RoCE switch, so HCCS keeps carrying the
traffic that makes the next fault measurable). The field guide's manual diagnosis took
about 3 minutes; the ratio against it is printed.
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time
from datetime import UTC, datetime

import _env  # noqa: F401  (environment, Redis, database)

from console.models import ClusterState, Node
from console.models.operations import Operation
from console.services.agents import agent_call
from console.services.inventory import DEMO_PROFILES
from console.services.operations import operation_start
from engine.sim.state import load_config, node_dir, save_config
from monitoring.alerts.services import alert_rules_seed
from monitoring.models_alerts import Alert, AlertRule, Incident
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

    recent = list(NodeSample.objects.order_by("-ts").values_list("node__name", "ts", "hccs_loss_pct", "engine_state")[:8])
    alerts = list(Alert.objects.values_list("rule__name", "target", "state", "fired_at", "resolved_at"))
    raise SystemExit(f"timed out waiting for {what}; latest samples {recent}; alerts {alerts}")


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


def run(interval: int, incidents: int, state_dir: str) -> tuple[list[float], list[float]]:
    profile = make_profile(**{**DEMO_PROFILES["w8a8"], "name": f"bench w8a8 {interval}"})
    cluster = make_cluster(f"remb{interval}", nodes=2, profile=profile, free_ports=True)
    nodes = cluster.ranked_nodes()
    target = nodes[1]
    env = {"SIM_TIME_SCALE": "0.05", "SIM_LOAD_S": "0.3", "SIM_STATE_DIR": state_dir}
    control_env = {"WARMUP_REQUESTS": "0", "DRAIN_TIMEOUT_S": "1", "FAILOVER_VERIFY_MS": "500",
                   "COLLECT_INTERVAL_S": str(interval), "ENGINE_HEALTH_TIMEOUT_S": "120"}
    detection: list[float] = []
    decision: list[float] = []
    with agents([n.name for n in nodes], extra_env=env, npu_ips={n.name: n.npu_ips for n in nodes}), control_worker(control_env):
        d = node_dir(target.name, base=state_dir)
        cfg = load_config(d)
        cfg.honours_roce_switch = False
        save_config(d, cfg)
        op = operation_start(cluster=cluster, kind="start", user=make_user(f"bench{interval}", "operator"))
        wait(lambda: Operation.objects.get(pk=op.pk).finished_at, 180, "the start")
        head = cluster.ranked_nodes()[0]
        url = f"http://{head.management_ip}:{head.api_port}/v1/completions"
        with Traffic(url, model=profile.served_model_name), Beat(interval):
            time.sleep(2 * interval)  # baseline counters
            last_alert = 0
            for i in range(incidents):
                time.sleep(random.uniform(0, interval))  # a random phase of the poll
                onset = datetime.now(UTC)
                agent_call(target, "sim.inject", fault="hccs-loss", value="20")
                alert = wait(lambda: Alert.objects.filter(rule__name="HCCS link loss", target=target.name, state="firing",
                                                          pk__gt=last_alert).first(), 20 * interval + 30, "the alert")
                seen = datetime.now(UTC)  # the firing is committed (polled every 20 ms)
                last_alert = alert.pk
                incident = wait(lambda: Incident.objects.filter(alert=alert).first(), 30, "the decision")
                first_op = wait(lambda: Operation.objects.filter(params__incident=incident.pk, started_at__isnull=False).first(),
                                60, "the operation")
                detection.append((seen - onset).total_seconds())
                decision.append(max(0.0, (first_op.started_at - seen).total_seconds()))
                wait(lambda: not Operation.objects.filter(cluster=cluster, finished_at__isnull=True).exists(), 180, "the failover")
                agent_call(target, "sim.clear")
                wait(lambda: Alert.objects.get(pk=alert.pk).state == "resolved", 20 * interval + 30, "the resolve")
                Node.objects.filter(pk=target.pk).update(link_mode="hccs")
                cluster.refresh_from_db()
                if cluster.state != ClusterState.RUNNING:
                    raise SystemExit(f"incident {i}: the cluster is {cluster.state}")
                print(f"  interval {interval} s, incident {i + 1}/{incidents}: detection {detection[-1]:.2f} s, decision {decision[-1]:.2f} s",
                      flush=True)
    return detection, decision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incidents", type=int, default=20, help="incidents per interval (default 20)")
    parser.add_argument("--intervals", default="1,5", help="poll intervals in seconds, comma-separated (default 1,5)")
    args = parser.parse_args()
    alert_rules_seed()
    AlertRule.objects.filter(name="HCCS link loss").update(cooldown_s=0, remediation_policy="auto", remediation_action="failover")
    results = {}
    for interval in (int(x) for x in args.intervals.split(",")):
        results[interval] = run(interval, args.incidents, os.path.join(_env.VAR, "sim", str(interval)))
    print(f"\n{'interval':>8} | {'detection p50':>13} {'p95':>7} | {'decision p50':>12} {'p95':>7} | vs manual ~{MANUAL_S:.0f} s")
    for interval, (det, dec) in results.items():
        p = _env.percentile
        total = p(det, 0.5) + p(dec, 0.5)
        print(f"{interval:>6} s | {p(det, 0.5):>11.2f} s {p(det, 0.95):>5.2f} s | {p(dec, 0.5):>10.2f} s {p(dec, 0.95):>5.2f} s"
              f" | {MANUAL_S / total:,.0f}× faster to act")


if __name__ == "__main__":
    main()

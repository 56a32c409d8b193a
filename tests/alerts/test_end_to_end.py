"""End to end: a real agent + sim engine with 20 % HCCS loss → collect rounds → the control worker's
evaluation fires the alert → webhooks (generic, Alertmanager) delivered by real Celery tasks; a dead
webhook is retried and marked failed while the alert stays."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from console.services.agents import agent_call
from monitoring.models import Alert, Incident, Notification, NotificationChannel
from monitoring.tasks import collect_round_task
from tests.agents import agent_worker, control_worker
from tests.factories import free_port
from tests.integration.test_agent import FAST_SIM, single_node_plan, wait_for
from tests.monitoring.test_collect_round import solo_cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

RETRIES = 2


class Receiver(BaseHTTPRequestHandler):
    received: list[tuple[str, dict[str, Any]]] = []

    def do_POST(self) -> None:  # noqa: N802  (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.received.append((self.path, json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class Traffic:
    """Completions in a few threads so the sim's links carry packets (and lose some)."""

    def __init__(
        self,
        url: str,
        streams: int = 4,
        model: str = "small",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.model = model
        self.headers = (
            headers or {}
        )  # the engine's API key, for console-started engines
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(url,), daemon=True)
            for _ in range(streams)
        ]

    def _run(self, url: str) -> None:
        while not self.stop.is_set():
            try:
                httpx.post(
                    url,
                    json={"model": self.model, "prompt": "hi", "max_tokens": 64},
                    headers=self.headers,
                    timeout=30,
                )
            except httpx.HTTPError:
                time.sleep(0.1)

    def __enter__(self) -> Traffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=35)


@pytest.fixture
def webhook_server() -> Iterator[str]:
    Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_it_fires_on_injected_hccs_loss_within_two_rounds_and_notifies(
    tmp_path: Path, webhook_server: str
) -> None:
    cluster, node = solo_cluster("alert-e2e")
    NotificationChannel.objects.create(
        name="generic", kind="webhook", url=f"{webhook_server}/generic"
    )
    NotificationChannel.objects.create(
        name="am", kind="webhook", url=f"{webhook_server}/am", format="alertmanager"
    )
    NotificationChannel.objects.create(
        name="dead", kind="webhook", url=f"http://127.0.0.1:{free_port()}/hook"
    )
    env = {
        **FAST_SIM,
        "SIM_STATE_DIR": str(tmp_path),
        "SIM_NPU_IPS": ",".join(f"127.10.96.{i + 1}" for i in range(8)),
    }
    with (
        control_worker(
            {"ALERT_NOTIFY_BACKOFF_MS": "50", "ALERT_NOTIFY_MAX_RETRIES": str(RETRIES)}
        ),
        agent_worker(node.name, extra_env=env),
    ):
        agent_call(
            node.name,
            "engine.start",
            plan=single_node_plan(node.name, node.api_port, node.rpc_port),
        )
        wait_for(
            lambda: agent_call(node.name, "engine.status")["health"] == 200, timeout=60
        )
        traffic = Traffic(
            f"http://127.0.0.1:{node.api_port}/v1/completions"
        ).__enter__()
        collect_round_task()  # baseline counters
        collect_round_task()
        assert not Alert.objects.filter(rule__name="HCCS link loss").exists()
        agent_call(node.name, "sim.inject", fault="hccs-loss", value="20")
        rounds = 0
        for _ in range(2):
            time.sleep(0.5)  # traffic (and lost packets) accumulate between polls
            collect_round_task()
            rounds += 1
            try:
                wait_for(
                    lambda: Alert.objects.filter(
                        rule__name="HCCS link loss", state="firing"
                    ).exists(),
                    timeout=10,
                )
                break
            except AssertionError:
                continue
        alert = Alert.objects.get(rule__name="HCCS link loss")
        assert alert.state == "firing" and rounds <= 2
        assert alert.target == node.name and alert.value == pytest.approx(20.0, abs=3.0)
        assert alert.fault_onset_at <= alert.fired_at  # type: ignore[operator]
        wait_for(
            lambda: not Notification.objects.filter(state="pending").exists(),
            timeout=30,
        )
        traffic.__exit__()
        agent_call(node.name, "engine.stop", grace_s=10)
    paths = {path: body for path, body in Receiver.received}
    assert (
        paths["/generic"]["status"] == "firing"
        and paths["/generic"]["alert"]["target"] == node.name
    )
    am = paths["/am"]
    assert (
        am["version"] == "4"
        and am["alerts"][0]["labels"]["alertname"] == "HCCS link loss"
    )
    dead = Notification.objects.get(channel__name="dead")
    assert (
        dead.state == "failed"
        and dead.attempts == RETRIES + 1
        and "ConnectError" in dead.last_error
    )
    assert set(
        Notification.objects.exclude(pk=dead.pk).values_list("state", flat=True)
    ) == {"sent"}
    alert.refresh_from_db()
    assert alert.state == "firing"  # a failed notification never loses the alert
    assert alert.events.filter(kind="notify_failed").count() == 1
    # the remediation pipeline took the alert: the cluster row is not marked serving
    # (the engine was started by hand), so the guardrail skipped it, on the record
    incident = Incident.objects.get(alert=alert)
    assert incident.action == "failover" and incident.state == "skipped"
    assert alert.events.filter(kind="remediation", data__incident=incident.pk).exists()

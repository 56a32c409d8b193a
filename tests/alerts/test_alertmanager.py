"""The Alertmanager channel against a real Alertmanager (Debian's prometheus-alertmanager,
started here on a free port): the alert arrives with its labels, `amtool` sees it, the
resend keeps it alive, and the resolved transition ends it."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.utils import timezone

from monitoring.alerts.alertmanager import alertmanager_resend
from monitoring.models import Notification, NotificationChannel
from tests.alerts.test_robots import deliver, fire, resolve
from tests.deploy.tools import need, run

pytestmark = [pytest.mark.django_db, pytest.mark.integration]

CONFIG = """\
route:
  receiver: nobody
receivers:
  - name: nobody
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "alertmanager.yml").write_text(CONFIG)
    url = f"http://127.0.0.1:{free_port()}"
    argv = [
        need("prometheus-alertmanager"),
        f"--config.file={tmp_path / 'alertmanager.yml'}",
        f"--storage.path={tmp_path / 'data'}",
        f"--web.listen-address={url.removeprefix('http://')}",
        "--cluster.listen-address=",  # no gossip: a single instance
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # noqa: S603
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (
                proc.stderr.read().decode() if proc.stderr else ""
            )
            assert time.monotonic() < deadline, "alertmanager did not become ready"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def amtool_alerts(url: str) -> list[dict[str, Any]]:
    result = run(
        [need("amtool"), f"--alertmanager.url={url}", "alert", "query", "-o", "json"]
    )
    assert result.returncode == 0, result.stderr
    alerts: list[dict[str, Any]] = json.loads(result.stdout or "[]")
    return alerts


def test_it_posts_into_a_real_alertmanager_and_resolves(
    cluster: Any, alertmanager: str, settings: Any
) -> None:
    settings.CONSOLE_BASE_URL = "https://console.example.gov.cn"
    NotificationChannel.objects.create(
        name="site-am", kind="alertmanager", url=alertmanager
    )
    alert, ctx = fire(cluster)
    assert deliver("firing") == "sent"
    [seen] = amtool_alerts(alertmanager)
    assert seen["labels"] == {
        "alertname": "HCCS link loss",
        "severity": "critical",
        "target": "ascend-03",
        "cluster": "qwen35-prod",
        "source": "ascend-console",
        **{k: str(v) for k, v in alert.labels.items()},
    }
    assert seen["status"]["state"] == "active"
    assert (
        seen["generatorURL"]
        == f"https://console.example.gov.cn/alerts/#alert-{alert.pk}"
    )
    assert seen["annotations"]["value"] == "20"
    ends = datetime.fromisoformat(seen["endsAt"].replace("Z", "+00:00"))
    # the resend refreshes endsAt, so Alertmanager does not resolve a live alert by itself
    time.sleep(1.1)
    assert alertmanager_resend() == 1
    [again] = amtool_alerts(alertmanager)
    assert datetime.fromisoformat(again["endsAt"].replace("Z", "+00:00")) > ends
    assert ends > timezone.now() + timedelta(seconds=3 * settings.ALERTMANAGER_RESEND_S)

    resolve(ctx)
    assert deliver("resolved") == "sent"
    assert amtool_alerts(alertmanager) == []  # resolved: gone from the active list
    body = httpx.get(f"{alertmanager}/api/v2/alerts", params={"active": "false"}).json()
    assert body == [] or all(a["status"]["state"] != "active" for a in body)
    assert Notification.objects.filter(state="sent").count() == 2


def test_it_fails_a_delivery_the_alertmanager_refuses(
    cluster: Any, alertmanager: str
) -> None:
    # a URL that is not an Alertmanager API: 404 from the real server, not retried; the
    # credentials a site may put in the URL never reach the error shown on the alert
    url = alertmanager.replace("http://", "http://console:pa55word@") + "/nope"
    NotificationChannel.objects.create(name="site-am", kind="alertmanager", url=url)
    alert, _ctx = fire(cluster)
    assert deliver("firing") == "failed"
    error = Notification.objects.get().last_error
    assert error.startswith(f"HTTP 404 from {alertmanager}/…")
    assert "pa55word" not in error
    assert "pa55word" not in alert.events.get(kind="notify_failed").message

"""Each agent authenticates to Redis as its own ACL user, confined to its own queue: a
real redis-server with the ACL file manage.py broker_acl prints, a real agent worker."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from django.core.management import call_command

from console.embedded_redis import free_port, redis_server_path
from console.models import Node
from console.services.broker_acl import agent_broker_url, console_password
from tests.agents import ROOT, die_with_parent
from tests.factories import make_cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@contextmanager
def acl_redis(tmp_path: Path, acl: str) -> Iterator[int]:
    port = free_port()
    (tmp_path / "users.acl").write_text(acl)
    proc = subprocess.Popen(
        [
            shutil.which("redis-server") or redis_server_path(),  # the system's (7.x) first
            "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(tmp_path), "--aclfile", str(tmp_path / "users.acl"),
        ],
        stdout=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(
                    port=port, username="console", password=console_password()
                ).ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def agent(node: str, url: str, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
        "NODE_NAME": node,
        "ENGINE_DRIVER": "sim",
        "SIM_STATE_DIR": str(tmp_path / "sim"),
        "CELERY_BROKER_URL": url,
        "CELERY_RESULT_BACKEND": url,
    }
    argv = [
        sys.executable, "-m", "celery", "-A", "engine.agent", "worker", "-Q", f"node.{node}",
        "-n", f"agent.{node}@test", "--pool", "threads", "--concurrency", "2",
        "--without-mingle", "--without-gossip", "--without-heartbeat", "--loglevel", "WARNING",
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, preexec_fn=die_with_parent,
    )  # fmt: skip
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def console_app(port: int) -> Celery:
    url = f"redis://console:{console_password()}@127.0.0.1:{port}/0"
    return Celery("acl-test", broker=url, backend=url, set_as_current=False)


def call(app: Celery, node: str, task: str, **kwargs: Any) -> Any:
    return app.send_task(
        task, kwargs={"node": node, **kwargs}, queue=f"node.{node}"
    ).get(timeout=30)


def test_each_agent_reaches_only_its_own_queue(tmp_path: Path) -> None:
    cluster = make_cluster(name="acl", nodes=2)
    first, second = cluster.ranked_nodes()
    # "ascend-0" is a prefix of "ascend-010": the patterns must not let one reach the other
    Node.objects.filter(pk=first.pk).update(
        name="ascend-0", agent_queue="node.ascend-0"
    )
    Node.objects.filter(pk=second.pk).update(
        name="ascend-010", agent_queue="node.ascend-010"
    )
    out = io.StringIO()
    call_command("broker_acl", stdout=out)
    acl = out.getvalue()
    assert "user default off" in acl and "agent-ascend-0 on #" in acl
    with acl_redis(tmp_path, acl) as port:
        mine = agent_broker_url("ascend-0", "127.0.0.1", port)
        with agent("ascend-0", mine, tmp_path):
            app = console_app(port)
            assert call(app, "ascend-0", "node.heartbeat")["node"] == "ascend-0"
            with pytest.raises(Exception, match="plan.role"):
                call(app, "ascend-0", "engine.start", plan={"role": "head\n[Service]"})

        who = redis.Redis(
            port=port,
            username="agent-ascend-0",
            password=mine.split(":")[2].split("@")[0],
        )
        who.ping()
        refused = [
            lambda: who.lpush(
                "node.ascend-010", "{}"
            ),  # another node's queue, by prefix
            lambda: who.lrange("node.ascend-010", 0, -1),
            lambda: who.lpush("control", "{}"),  # the console's control queue
            lambda: who.keys("*"),
            lambda: who.scan(0),
            lambda: who.config_get("*"),
            lambda: who.flushall(),
            lambda: who.hgetall(
                "unacked"
            ),  # the shared unacked hash of other consumers
            lambda: who.publish("/0.celeryev/worker.heartbeat", "x"),
            lambda: who.sadd("_kombu.binding.node.ascend-010", "x"),
        ]
        for attempt in refused:
            with pytest.raises(redis.exceptions.NoPermissionError):
                attempt()
        assert who.llen("node.ascend-0") == 0  # its own queue it may read

        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=port).ping()  # no default user
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=port, username="agent-ascend-0", password="guess").ping()

"""A task travels control side → Redis → a real node-agent worker process → back."""

from __future__ import annotations

import pytest

from console.celery import app, route_task
from tests.agents import agent_worker

pytestmark = pytest.mark.integration


def test_it_routes_agent_tasks_to_the_nodes_queue() -> None:
    assert route_task("node.collect", (), {"node": "ascend-02"}, {}) == {
        "queue": "node.ascend-02"
    }
    assert route_task("engine.start", (), {"node": "ascend-01"}, {}) == {
        "queue": "node.ascend-01"
    }
    assert route_task("operations.run", (), {}, {}) == {"queue": "control"}
    with pytest.raises(ValueError, match="needs a node= keyword"):
        route_task("node.collect", (), {}, {})


def test_it_round_trips_through_a_real_agent_worker() -> None:
    with agent_worker("rt-node"):
        result = app.send_task(
            "node.echo",
            kwargs={"node": "rt-node", "payload": {"x": [1, 2], "s": "集群"}},
        )
        assert result.get(timeout=30) == {
            "node": "rt-node",
            "payload": {"x": [1, 2], "s": "集群"},
        }
        beat = app.send_task("node.heartbeat", kwargs={"node": "rt-node"}).get(
            timeout=30
        )
        assert beat["node"] == "rt-node" and beat["driver"] == "sim"


def test_it_never_accepts_pickle() -> None:
    from engine.agent import app as agent_app

    assert agent_app.conf.accept_content == ["json"]
    assert app.conf.accept_content == ["json"]


def test_importing_the_agent_keeps_control_tasks_on_the_control_queue() -> None:
    """A control-side process that imports engine.agent (the e2e tests do) once sent
    operations.run to the agent's default queue node.<host>, where nobody consumes it."""
    import redis
    from celery import current_app
    from django.conf import settings

    import engine.agent  # noqa: F401
    from console.tasks import operation_reap_task

    assert current_app.main == "console"
    assert operation_reap_task.app is app
    r = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    before = r.llen("control")
    operation_reap_task.apply_async()
    assert r.llen("control") == before + 1
    r.delete("control")

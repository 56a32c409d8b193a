"""The node agent: a Celery worker on queue ``node.<name>`` with allowlisted tasks only.

Start it on an Ascend server with::

    NODE_NAME=ascend-01 ENGINE_DRIVER=systemd CELERY_BROKER_URL=redis://console:6379/0 \\
        celery -A engine.agent worker -Q node.ascend-01

It imports no Django and holds no database credentials. Every task maps to argv
built locally: ``engine.start`` accepts only a ``vllm serve`` command line whose
flags pass the target version's flag check and whose environment names are on an
allowlist; nothing received over the wire runs as a command string.

The package: ``boundary`` (settings, the Celery app, the task allowlist, plan
validation), ``lifecycle`` (engine.*), ``node`` (heartbeat, evidence, collect,
preflight, weights), ``benchmark`` (node.bench_*), ``simulator`` (sim.*). Importing
the package imports every task module, so ``app`` registers every task.
"""

from __future__ import annotations

import sys

# kombu.utils.json imports django.utils when Django happens to be installed (pip
# install .[node] brings the console's dependencies along). The agent must never
# load Django: hide it while kombu's JSON module loads, then take the block away.
# Here, before any module of the package (importing one runs this file first), with
# every third-party import of the package's modules: celery.utils.collections, which
# Celery loads, tries Django too.
_blocked = "django" not in sys.modules
if _blocked:
    sys.modules["django"] = None  # type: ignore[assignment]
import kombu.utils.json  # noqa: E402,F401
import psutil  # noqa: E402,F401
from celery import Celery, current_task  # noqa: E402,F401
from celery.exceptions import Ignore  # noqa: E402,F401
from celery.signals import worker_init, worker_shutdown  # noqa: E402,F401

if _blocked:
    del sys.modules["django"]

from engine.agent.benchmark import BENCH_PID, node_bench_serve, node_bench_stop  # noqa: E402
from engine.agent.boundary import (  # noqa: E402
    AGENT_VERSION,
    ALLOWED_ENV_PREFIXES,
    ALLOWED_TASKS,
    AgentConfig,
    agent_task,
    app,
    config,
    validate_plan,
)
from engine.agent.lifecycle import (  # noqa: E402
    HANDSHAKE_RE,
    RUN_START,
    STARTUP_COMPLETE,
    WAITING_RE,
    engine_logs,
    engine_start,
    engine_status,
    engine_stop,
    ranks_joined,
)
from engine.agent.node import (  # noqa: E402
    echo,
    heartbeat,
    node_collect,
    node_evidence,
    node_preflight,
    node_weights_sha256,
)
from engine.agent.simulator import sim_clear, sim_inject, sim_state  # noqa: E402

__all__ = [
    "AGENT_VERSION",
    "ALLOWED_ENV_PREFIXES",
    "ALLOWED_TASKS",
    "BENCH_PID",
    "HANDSHAKE_RE",
    "RUN_START",
    "STARTUP_COMPLETE",
    "WAITING_RE",
    "AgentConfig",
    "agent_task",
    "app",
    "config",
    "echo",
    "engine_logs",
    "engine_start",
    "engine_status",
    "engine_stop",
    "heartbeat",
    "node_bench_serve",
    "node_bench_stop",
    "node_collect",
    "node_evidence",
    "node_preflight",
    "node_weights_sha256",
    "ranks_joined",
    "sim_clear",
    "sim_inject",
    "sim_state",
    "validate_plan",
]

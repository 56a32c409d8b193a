"""The agent's configuration and trust boundary: its settings (AgentConfig), the Celery
app it serves, the task allowlist (ALLOWED_TASKS, agent_task), the node check and the
validation of a plan before anything runs."""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery
from celery.exceptions import Ignore
from celery.signals import worker_init

from engine.drivers import get_driver, node_driver
from engine.drivers.base import Driver, EngineSpec
from engine.flags import check_argv
from engine.messages import check_message, check_plan

AGENT_VERSION = "0.2.0"
# Environment names a plan may set for vllm serve. Anything else (LD_PRELOAD, PATH,
# PYTHONPATH, …) could turn a plan into code execution, so it is refused.
ALLOWED_ENV_PREFIXES = (
    "HCCL_",
    "GLOO_",
    "TP_SOCKET_",
    "OMP_",
    "TASK_QUEUE_ENABLE",
    "PYTORCH_NPU_",
    "ASCEND_",
    "VLLM_",
    "HF_",
    "TRANSFORMERS_",
    "TOKENIZERS_",
    "CPU_AFFINITY",
    "ACL_",
    "MS_",
    "INF_NAN_MODE",
)


@dataclass(frozen=True)
class AgentConfig:
    """The agent's settings, from the environment (Django settings do not exist on a node)."""

    node_name: str
    broker_url: str
    result_backend: str
    driver: str
    workdir: Path
    vllm_version: str

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> AgentConfig:
        env = dict(os.environ if environ is None else environ)
        node = (
            env.get("NODE_NAME") or env.get("CONSOLE_NODE_NAME") or socket.gethostname()
        )
        broker = (
            env.get("CELERY_BROKER_URL")
            or env.get("REDIS_URL")
            or "redis://127.0.0.1:16379/0"
        )
        backend = env.get("CELERY_RESULT_BACKEND") or env.get("REDIS_URL") or broker
        if backend.startswith("amqp"):
            backend = "rpc://"
        driver = env.get("ENGINE_DRIVER", "systemd")
        workdir = get_driver(driver).workdir(node, env)
        version = (
            env.get("SIM_VLLM_VERSION")
            or env.get("AGENT_VLLM_VERSION")
            or _installed_vllm()
            or "0.23.0"
        )
        return cls(
            node_name=node,
            broker_url=broker,
            result_backend=backend,
            driver=driver,
            workdir=workdir.resolve(),
            vllm_version=version,
        )


def _installed_vllm() -> str | None:
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


config = AgentConfig.from_env()

# fixups=[]: never load Celery's Django fix-up, even if DJANGO_SETTINGS_MODULE leaks into the env.
# set_as_current=False: a control-side process that imports this module (tests, tools) must keep
# the console's app as Celery's current app, or its shared tasks would publish to node.<host>.
app = Celery(
    "engine.agent",
    broker=config.broker_url,
    backend=config.result_backend,
    fixups=[],
    set_as_current=False,
)
app.conf.update(
    accept_content=["json"],  # never unpickle what comes over the wire
    task_serializer="json",
    result_serializer="json",
    task_default_queue=f"node.{config.node_name}",
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=1,
    result_expires=3600,
    task_time_limit=900,
    # No remote control: without it anyone on the broker could inspect().conf() the agent
    # or broadcast("shutdown") to stop it. The agent consumes node.<name> and nothing else.
    worker_enable_remote_control=False,
    # Redis: the agent's own unacked keys (kombu's defaults are one hash shared by every
    # consumer), so a Redis ACL can confine each agent to keys of its own node
    # (console/services/broker_acl.py); other transports ignore these options.
    broker_transport_options={
        "unacked_key": f"unacked:node.{config.node_name}",
        "unacked_index_key": f"unacked_index:node.{config.node_name}",
        "unacked_mutex_key": f"unacked_mutex:node.{config.node_name}",
    },
)


@functools.cache
def _driver() -> Driver:
    """This node's driver, its node prepared once: at worker start or on the first task,
    never at import (importing this module changes nothing in the process)."""
    driver = node_driver(config.driver)
    driver.prepare_node(config.node_name, config.workdir)
    return driver


@worker_init.connect  # type: ignore[untyped-decorator]
def _prepare_node(**_: Any) -> None:
    _driver()


# Every task this agent runs. Celery executes only registered tasks; this set is
# the reviewable allowlist, and a test checks the registry equals it.
ALLOWED_TASKS = frozenset(
    {
        "node.heartbeat",
        "node.echo",
        "node.collect",
        "node.preflight",
        "node.weights_sha256",
        "node.bench_serve",
        "node.bench_stop",
        "engine.start",
        "engine.stop",
        "engine.status",
        "engine.logs",
        "node.evidence",
        "sim.inject",
        "sim.clear",
        "sim.state",
    }
)


def agent_task(name: str) -> Callable[[Callable[..., Any]], Any]:
    """Register an allowlisted task. On a sim node with the ``agent-stop`` fault the task
    answers nothing (no result is stored), so the control side sees a dead agent."""

    def decorator(func: Callable[..., Any]) -> Any:
        signature = inspect.signature(func)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # every field of the message on its task's allowlist before anything runs
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise ValueError(f"{name}: {exc}") from None
            check_message(name, bound.arguments)
            if name not in {"sim.clear", "sim.state"} and not _driver().answers(
                config.node_name
            ):
                raise Ignore()
            return func(*args, **kwargs)

        return app.task(name=name, shared=False)(wrapper)

    return decorator


def _check_node(node: str) -> None:
    if node != config.node_name:
        raise ValueError(
            f"task for node {node!r} reached the agent of {config.node_name!r}; check the queue routing"
        )


def _spec(
    rank: int = 0,
    role: str = "head",
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> EngineSpec:
    config.workdir.mkdir(parents=True, exist_ok=True)
    return EngineSpec(
        node=config.node_name,
        rank=rank,
        role=role,
        argv=argv or [],
        env=env or {},
        workdir=str(config.workdir),
    )


def validate_plan(plan: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Refuse anything but a ``vllm serve`` argv with known flags and allowlisted env names."""
    check_plan(plan)  # keys, types, the role, no control characters
    argv = [str(a) for a in plan.get("argv") or []]
    env = {str(k): str(v) for k, v in dict(plan.get("env") or {}).items()}
    if argv[:2] != ["vllm", "serve"] or len(argv) < 3:
        raise ValueError(
            f"plan argv must be 'vllm serve MODEL [flags]', got {argv[:3]!r}"
        )
    problems = check_argv(argv[2:], config.vllm_version)
    if problems:
        raise ValueError(
            f"plan flags rejected for vLLM {config.vllm_version}: "
            + "; ".join(p.message for p in problems)
        )
    bad = sorted(k for k in env if not k.startswith(ALLOWED_ENV_PREFIXES))
    if bad:
        raise ValueError(
            f"plan environment names not allowed on the agent: {', '.join(bad)}"
        )
    return argv, env

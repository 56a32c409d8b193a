"""The node's own tasks: heartbeat and echo, the evidence bundle, a telemetry sample,
the preflight checks and the sha256 manifest of a model's weights."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from celery import current_task

from engine import weights
from engine.agent.boundary import (
    AGENT_VERSION,
    _check_node,
    _driver,
    _spec,
    agent_task,
    config,
)
from engine.agent.lifecycle import _saved_argv
from engine.collect import collect
from engine.drivers import get_driver
from engine.evidence import check_request, gather
from engine.preflight import check_server_model, run_preflight, versions


@agent_task("node.heartbeat")
def heartbeat(node: str) -> dict[str, Any]:
    """Who and where this agent is; the control side uses it for reachability."""
    return {
        "node": config.node_name,
        "asked_for": node,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "driver": config.driver,
        "agent_version": AGENT_VERSION,
        "vllm_version": config.vllm_version,
        "time": time.time(),
    }


@agent_task("node.echo")
def echo(node: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Return the payload unchanged (round-trip check of the JSON transport)."""
    return {"node": config.node_name, "payload": payload}


@agent_task("node.evidence")
def node_evidence(node: str, log_lines: int = 2000) -> dict[str, Any]:
    """A bounded evidence bundle (engine.evidence): engine log, newest plogs, npu-smi,
    link state, davinci/HCCS dmesg lines, versions. Reads allowlisted places only."""
    _check_node(node)
    lines = check_request(log_lines=log_lines)
    tail = get_driver(config.driver).logs(_spec(argv=_saved_argv()), lines=lines)
    home = _driver().home_dir(config.node_name)
    return gather(
        node=config.node_name,
        engine_log=tail,
        home=home,
        environ=os.environ,
        versions=versions(),
    )


@agent_task("node.collect")
def node_collect(
    node: str, model_path: str | None = None, detect_server_model: bool = False
) -> dict[str, Any]:
    """One telemetry sample: parsed npu-smi and hccn_tool, host CPU/memory/load/disk,
    engine RSS; with ``detect_server_model`` also the server model, detected as
    preflight does (asked once for a node whose model was never detected)."""
    _check_node(node)
    status = get_driver(config.driver).status(_spec(argv=_saved_argv()))
    sample = collect(
        node=config.node_name,
        model_path=model_path,
        engine_pids=[status.pid] if status.pid else [],
    )
    sample["engine"] = {
        "state": status.state,
        "pid": status.pid,
        "uptime_s": status.uptime_s,
    }
    if detect_server_model:
        sample["server_model"] = check_server_model()[1].to_dict()
    return sample


@agent_task("node.preflight")
def node_preflight(
    node: str,
    expected_npus: int,
    host_ip: str,
    ports: list[int],
    model_path: str,
    ping_targets: list[str],
    vllm_ascend_version: str = "",
) -> dict[str, Any]:
    """The node-side preflight checks (engine.preflight), each pass/warn/fail with evidence and a fix."""
    _check_node(node)
    result = run_preflight(
        expected_npus=int(expected_npus),
        host_ip=str(host_ip),
        ports=[int(p) for p in ports],
        model_path=str(model_path),
        ping_targets=[str(t) for t in ping_targets],
        vllm_ascend_version=str(vllm_ascend_version),
    )
    return {"node": config.node_name, "driver": config.driver, **result}


@agent_task("node.weights_sha256")
def node_weights_sha256(node: str, model_path: str) -> dict[str, Any]:
    """The model directory's manifest with a sha256 per file (engine/weights.py): cached
    by size and mtime, read at most ``WEIGHTS_HASH_MB_S`` MB/s. While it reads, the
    task's state is ``PROGRESS`` with weights.HashProgress's fields (file, done/total
    bytes, files_done/files), which the console shows; the answer carries the final
    ``progress`` (``cached`` files and ``bytes_read`` say what the cache saved)."""
    _check_node(node)
    local = _driver().model_dir(str(model_path), config.node_name)
    found = weights.manifest(local)
    cache = weights.HashCache(
        config.workdir / "weights-sha256.json",
        max_mb_s=float(os.environ.get("WEIGHTS_HASH_MB_S", "200")),
    )
    task = current_task

    def report(state: dict[str, Any]) -> None:
        if task is not None and task.request.id:
            task.update_state(state="PROGRESS", meta=state)

    if found["exists"]:
        found["sha256"], found["progress"] = weights.hash_manifest(local, cache, report)
    else:
        found["sha256"], found["progress"] = {}, {}
    found["path"] = str(model_path)
    return {"node": config.node_name, **found}

"""The simulator's tasks: inject and clear faults, read a sim node's state (every other
driver refuses them)."""

from __future__ import annotations

import contextlib
from typing import Any

import psutil

from engine.agent.boundary import _check_node, _driver, _spec, agent_task, config
from engine.agent.lifecycle import _saved_argv
from engine.drivers import get_driver


@agent_task("sim.inject")
def sim_inject(node: str, fault: str, value: str | None = None) -> dict[str, Any]:
    """Inject a simulated fault (refused unless this node runs the sim driver).

    ``crash once|always`` also kills a running engine now, like a real crash would.
    """
    _check_node(node)
    injected = _driver().fault_inject(config.node_name, fault, value)
    killed = False
    if fault == "crash":
        driver = get_driver(config.driver)
        spec = _spec(argv=_saved_argv())
        status = driver.status(spec)
        if status.state == "running" and status.pid:
            # what a rank dying of a device fault leaves: its plog and EE9999 on stderr
            _driver().leave_crash_traces(
                config.node_name, config.workdir / "engine.log", status.pid
            )
            # SIGKILL the tree without the driver's stop bookkeeping: the engine "ended on
            # its own" (status exited), exactly what the console sees after a real crash.
            try:
                root = psutil.Process(status.pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                tree = []
            for proc in tree:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
            psutil.wait_procs(tree, timeout=5)
            killed = bool(tree)
    return {"node": config.node_name, **injected, "killed_engine": killed}


@agent_task("sim.clear")
def sim_clear(node: str) -> dict[str, Any]:
    """Clear every simulated fault on this node."""
    _check_node(node)
    return {"node": config.node_name, **_driver().fault_clear(config.node_name)}


@agent_task("sim.state")
def sim_state(node: str) -> dict[str, Any]:
    """The simulated node's config, faults and engine activity."""
    _check_node(node)
    return {"node": config.node_name, **_driver().sim_state(config.node_name)}

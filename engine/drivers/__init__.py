"""Engine drivers behind a registry of dotted paths.

get_driver("process").start(spec)
"""

from __future__ import annotations

import functools
import os
from importlib import import_module

from engine.drivers.base import Driver, DriverError, EngineSpec, EngineStatus

DRIVERS: dict[str, str] = {
    "systemd": "engine.drivers.systemd.SystemdDriver",  # real nodes: one unit per node
    # real nodes without systemd access
    "process": "engine.drivers.process.ProcessDriver",
    # simulated nodes: same code path, sim binaries
    "sim": "engine.drivers.sim.SimDriver",
    # real nodes running vllm-ascend's image (docker/podman; CONTAINER_ENGINE)
    "container": "engine.drivers.container.ContainerDriver",
}

__all__ = [
    "DRIVERS",
    "Driver",
    "DriverError",
    "EngineSpec",
    "EngineStatus",
    "get_driver",
    "node_driver",
]


def get_driver(name: str) -> Driver:
    """Return a new driver instance for ``name``.

    Raises ValueError naming the known drivers when ``name`` is not one of them.
    """
    try:
        dotted = DRIVERS[name]
    except KeyError:
        known = ", ".join(sorted(DRIVERS))
        raise ValueError(
            f"unknown engine driver {name!r}; use one of: {known}"
        ) from None
    module_name, _, class_name = dotted.rpartition(".")
    cls = getattr(import_module(module_name), class_name)
    driver = cls()
    if not isinstance(driver, Driver):
        raise TypeError(f"{dotted} is not an engine.drivers.base.Driver")
    return driver


def node_driver(name: str | None = None) -> Driver:
    """The driver of this process's node (``ENGINE_DRIVER``, systemd when unset), shared."""
    return _shared(name or os.environ.get("ENGINE_DRIVER", "systemd"))


@functools.cache
def _shared(name: str) -> Driver:
    return get_driver(name)

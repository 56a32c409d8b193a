"""``docker stop`` and ``docker rm`` for the fake ``docker``: ending and removing containers.

The two subcommands that signal a container's process group and write its end;
the read-only subcommands are in :mod:`engine.sim.docker_cli.query`.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from engine.sim.docker_cli.errors import CliError, flag_value, number
from engine.sim.docker_cli.store import _dir, _find, _remove, _state
from engine.sim.state import write_json


def _signal(c: dict[str, Any], sig: int) -> None:
    try:
        os.kill(c["State"]["Pid"], sig)
    except ProcessLookupError:
        pass


def cmd_stop(args: list[str]) -> int:
    grace, names, i = 10.0, [], 0
    while i < len(args):
        if args[i] in ("--time", "-t", "--timeout"):
            grace, i = number(args[i], flag_value(args, i), float), i + 2
        elif args[i].startswith("--time="):
            grace, i = number("--time", args[i].split("=", 1)[1], float), i + 1
        elif args[i].startswith("-"):
            raise CliError(f"unknown flag: {args[i]}")
        else:
            names.append(args[i])
            i += 1
    for ref in names:
        c = _find(ref)
        if c is None:
            raise CliError(
                f"Error response from daemon: No such container: {ref}", code=1
            )
        if _state(c)["Running"]:
            _signal(c, signal.SIGTERM)  # the runner forwards it: vLLM drains and exits
            deadline = time.monotonic() + grace
            while _state(c)["Running"] and time.monotonic() < deadline:
                time.sleep(0.1)
            if _state(c)["Running"]:
                try:
                    os.killpg(c["State"]["Pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
                write_json(
                    _dir() / f"{c['Id']}.exit",
                    {
                        "exit_code": -9,
                        "pid": c["State"]["Pid"],
                        "ended_at": time.time(),
                    },
                )
        print(ref)
    return 0


def cmd_rm(args: list[str]) -> int:
    force = any(a in ("-f", "--force") for a in args)
    for ref in [a for a in args if not a.startswith("-")]:
        c = _find(ref)
        if c is None:
            raise CliError(
                f"Error response from daemon: No such container: {ref}", code=1
            )
        if _state(c)["Running"]:
            if not force:
                raise CliError(
                    f'Error response from daemon: cannot remove container "/{ref}": container is running: stop the container before removing or force remove',
                    code=1,
                )
            try:
                os.killpg(c["State"]["Pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
        _remove(c)
        print(ref)
    return 0

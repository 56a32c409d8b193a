"""The fake ``docker``'s entry point: ``main`` looks the subcommand up and prints its errors.

``version`` is answered here; every other subcommand is a handler in
:mod:`~engine.sim.docker_cli.run`, :mod:`~engine.sim.docker_cli.lifecycle` or
:mod:`~engine.sim.docker_cli.query`.
"""

from __future__ import annotations

import os
import sys

from engine.sim.docker_cli.errors import CliError
from engine.sim.docker_cli.lifecycle import cmd_rm, cmd_stop
from engine.sim.docker_cli.query import cmd_image, cmd_inspect, cmd_logs, cmd_ps
from engine.sim.docker_cli.run import cmd_run
from engine.sim.docker_cli.template import _format_arg, render_format

SERVER_VERSION = "28.2.2"


USAGE = """
Usage:  {prog} [OPTIONS] COMMAND

The simulator's stand-in for {prog}: a container is the simulated vLLM engine.

Commands:
  run         Create and run a new container from an image
  inspect     Return low-level information on Docker objects
  stop        Stop one or more running containers
  rm          Remove one or more containers
  logs        Fetch the logs of a container
  ps          List containers
  image       Manage images (inspect)
  version     Show the Docker version information

Run '{prog} run --help' for the options of run (the real docker's, verbatim).
"""


def main(argv: list[str]) -> int:
    prog = os.path.basename(sys.argv[0]) or "docker"
    if prog.endswith(".py"):  # python -m engine.sim.docker_cli
        prog = "docker"
    if argv[:1] in (["--help"], ["-h"], ["help"]):
        sys.stdout.write(USAGE.format(prog=prog))
        return 0
    if not argv:
        print(f"Usage:  {prog} [OPTIONS] COMMAND", file=sys.stderr)
        return 1
    cmd, args = argv[0], argv[1:]
    handlers = {
        "run": cmd_run,
        "inspect": cmd_inspect,
        "stop": cmd_stop,
        "rm": cmd_rm,
        "logs": cmd_logs,
        "ps": cmd_ps,
        "image": cmd_image,
    }
    try:
        if cmd == "version":
            fmt, _ = _format_arg(args)
            obj = {
                "Client": {"Version": SERVER_VERSION},
                "Server": {"Version": SERVER_VERSION},
            }
            print(render_format(fmt, obj) if fmt else f"Server: {SERVER_VERSION}")
            return 0
        if cmd not in handlers:
            # main prefixes the program's name, as for every message of its own
            raise CliError(
                f"'{cmd}' is not a {prog} command (in the simulator).", code=1
            )
        return handlers[cmd](args)
    except CliError as exc:
        print(
            f"{prog}: {exc}"
            if not str(exc).startswith(("docker", "Error", "unknown", "Unable"))
            else str(exc),
            file=sys.stderr,
        )
        return exc.code

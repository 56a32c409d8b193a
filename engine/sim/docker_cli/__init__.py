"""Simulator stand-in for the ``docker``/``podman`` CLI: the subset the container driver uses.

Why a stand-in: this machine has the docker client but no engine, and Debian's podman
is not installed (``apt-cache policy podman``: candidate 4.3.1, 28 packages) and could
not get an image here without pulling one. So the grammar is the real one: every
``run`` option is checked against ``docker-run-help.txt`` (the real ``docker run
--help``, kept verbatim) — an option docker does not have fails with docker's own
``unknown flag`` message and exit 125; a real option outside the simulated subset fails
naming it. A started "container" is the sim engine (``python -m engine.sim.vllm serve``)
with the container's environment only, under ``engine/drivers/_runner.py`` so its exit
code is kept. State lives in ``$SIM_STATE_DIR/<node>/containers/``.

Subcommands: version, run, inspect, stop, rm, logs, ps, image inspect.

``errors`` holds ``CliError``; ``grammar`` the ``run`` grammar; ``store`` the containers
and images on disk; ``template`` ``--format``; ``run`` ``docker run``; ``lifecycle``
``stop``/``rm``; ``query`` ``inspect``/``image inspect``/``logs``/``ps``; ``cli``
``main`` and ``version``.
"""

from __future__ import annotations

from engine.sim.docker_cli.cli import (
    SERVER_VERSION,
    main,
)
from engine.sim.docker_cli.errors import (
    CliError,
)
from engine.sim.docker_cli.grammar import (
    HELP,
    OPTION_LINE,
    SIMULATED,
    parse_run,
    run_grammar,
)
from engine.sim.docker_cli.lifecycle import (
    cmd_rm,
    cmd_stop,
)
from engine.sim.docker_cli.query import (
    cmd_image,
    cmd_inspect,
    cmd_logs,
    cmd_ps,
)
from engine.sim.docker_cli.run import (
    REPO,
    RUNNER,
    SIM_BIN,
    cmd_run,
)
from engine.sim.docker_cli.store import (
    VERSION_LABEL,
    images,
)
from engine.sim.docker_cli.template import (
    render_format,
)

__all__ = [
    "HELP",
    "OPTION_LINE",
    "REPO",
    "RUNNER",
    "SERVER_VERSION",
    "SIMULATED",
    "SIM_BIN",
    "VERSION_LABEL",
    "CliError",
    "cmd_image",
    "cmd_inspect",
    "cmd_logs",
    "cmd_ps",
    "cmd_rm",
    "cmd_run",
    "cmd_stop",
    "images",
    "main",
    "parse_run",
    "render_format",
    "run_grammar",
]

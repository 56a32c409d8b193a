"""``docker run``'s grammar, read from the real ``docker run --help`` (``docker-run-help.txt``).

Every option is checked against that help text: one docker does not have fails with
docker's own ``unknown flag`` message (exit 125); a real option outside
:data:`SIMULATED` fails naming it. Separate from starting the container so that the
grammar can be tested alone (tests/engine/test_container_driver.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from engine.sim.docker_cli.errors import CliError

HELP = Path(__file__).parent.with_name("docker-run-help.txt")
# run options the simulator gives a meaning to; every other real option is refused
SIMULATED = {
    "detach",
    "rm",
    "name",
    "label",
    "network",
    "shm-size",
    "restart",
    "device",
    "volume",
    "env",
}
OPTION_LINE = re.compile(r"^\s+(?:-(\w), )?--([a-z][\w-]*)(?: ([a-z][\w-]*))?\s{2,}")


def run_help() -> str:
    """The real ``docker run --help``, as kept (the file's first line says where from)."""
    return HELP.read_text(encoding="utf-8").split("\n", 1)[1]


def run_grammar() -> dict[str, tuple[str, bool]]:
    """``docker run`` options from the real help text: name/short → (long name, takes value)."""
    grammar: dict[str, tuple[str, bool]] = {}
    for line in HELP.read_text(encoding="utf-8").splitlines():
        m = OPTION_LINE.match(line)
        if not m:
            continue
        short, long_, kind = m.groups()
        grammar[f"--{long_}"] = (long_, kind is not None)
        if short:
            grammar[f"-{short}"] = (long_, kind is not None)
    return grammar


def parse_run(args: list[str]) -> tuple[dict[str, list[str]], str, list[str]]:
    """(options by long name → values, image, command) for ``docker run`` args."""
    grammar = run_grammar()
    opts: dict[str, list[str]] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        arg = args[i]
        key, _, inline = arg.partition("=")
        if key not in grammar:
            raise CliError(f"unknown flag: {key}\nSee 'docker run --help'.")
        long_, takes = grammar[key]
        if long_ not in SIMULATED:
            raise CliError(f"sim docker: --{long_} is docker grammar but not simulated")
        if takes:
            if inline or "=" in arg:
                value = inline
            else:
                i += 1
                if i >= len(args):
                    raise CliError(f"flag needs an argument: {key}")
                value = args[i]
            opts.setdefault(long_, []).append(value)
        else:
            if inline not in ("", "true", "false"):
                raise CliError(f'invalid argument "{inline}" for "{key}" flag')
            opts[long_] = [inline or "true"]
        i += 1
    if i >= len(args):
        raise CliError('"docker run" requires at least 1 argument.')
    return opts, args[i], args[i + 1 :]

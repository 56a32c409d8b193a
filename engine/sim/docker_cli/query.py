"""The read-only subcommands of the fake ``docker``: ``inspect``, ``image inspect``, ``logs``, ``ps``.

They read :mod:`engine.sim.docker_cli.store` and print; nothing here changes a
container.
"""

from __future__ import annotations

import json
import sys

from engine.sim.docker_cli.errors import CliError, flag_value, number
from engine.sim.docker_cli.store import _dir, _find, _state, images
from engine.sim.docker_cli.template import _format_arg, render_format
from engine.sim.state import read_json


def cmd_inspect(args: list[str]) -> int:
    fmt, refs = _format_arg(args)
    code = 0
    for ref in refs:
        c = _find(ref)
        if c is None:
            print(f"Error: No such object: {ref}", file=sys.stderr)
            code = 1
            continue
        c = {**c, "State": _state(c)}
        print(render_format(fmt, c) if fmt else json.dumps([c], indent=4))
    return code


def cmd_image(args: list[str]) -> int:
    if not args or args[0] != "inspect":
        raise CliError(f"sim docker: image {' '.join(args[:1])} is not simulated")
    fmt, refs = _format_arg(args[1:])
    have = images()
    code = 0
    for ref in refs:
        if ref not in have:
            print(f"Error: No such image: {ref}", file=sys.stderr)
            code = 1
            continue
        obj = {"RepoTags": [ref], "Config": {"Labels": have[ref]}}
        print(render_format(fmt, obj) if fmt else json.dumps([obj], indent=4))
    return code


def cmd_logs(args: list[str]) -> int:
    tail, refs, i = None, [], 0
    while i < len(args):
        if args[i] in ("--tail", "-n"):
            tail, i = flag_value(args, i), i + 2
        else:
            refs.append(args[i])
            i += 1
    if len(refs) != 1:
        raise CliError('"docker logs" requires exactly 1 argument.', code=1)
    c = _find(refs[0])
    if c is None:
        raise CliError(
            f"Error response from daemon: No such container: {refs[0]}", code=1
        )
    lines = (
        (_dir() / f"{c['Id']}.log")
        .read_text(encoding="utf-8", errors="replace")
        .splitlines()
    )
    if tail not in (None, "all"):
        n = number("--tail", tail, int)
        lines = lines[-n:] if n else []
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


def cmd_ps(args: list[str]) -> int:
    show_all = any(a in ("-a", "--all") for a in args)
    quiet = any(a in ("-q", "--quiet") for a in args)
    full = "--no-trunc" in args
    for f in sorted(_dir().glob("*.json")):
        c = read_json(f)
        if not c or not (show_all or _state(c)["Running"]):
            continue
        cid = c["Id"] if full else c["Id"][:12]
        print(cid if quiet else f"{cid}  {c['Image']}  {c['Name'].lstrip('/')}")
    return 0

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
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engine.sim.state import load_config, node_dir, read_json, write_json

HELP = Path(__file__).with_name("docker-run-help.txt")
REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "engine" / "drivers" / "_runner.py"
SIM_BIN = Path(__file__).resolve().parent / "bin"
SERVER_VERSION = "28.2.2"
VERSION_LABEL = "org.opencontainers.image.version"
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


class CliError(Exception):
    def __init__(self, message: str, code: int = 125) -> None:
        super().__init__(message)
        self.code = code


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


def _dir() -> Path:
    d = node_dir() / "containers"
    d.mkdir(parents=True, exist_ok=True)
    return d


def images() -> dict[str, dict[str, str]]:
    """Images present on this sim node: those of its vllm-ascend version (A2 and A3),
    unless ``images.json`` in the node's state says otherwise."""
    saved = read_json(node_dir() / "images.json")
    if saved:
        return dict(saved)
    version = load_config(node_dir()).versions.get("vllm_ascend", "")
    repo = "quay.io/ascend/vllm-ascend"
    return {
        f"{repo}:v{version}{suffix}": {VERSION_LABEL: f"v{version}"}
        for suffix in ("", "-a3")
    }


def _find(ref: str) -> dict[str, Any] | None:
    for f in _dir().glob("*.json"):
        c = read_json(f)
        if c and (c["Name"] == f"/{ref}" or c["Id"].startswith(ref)):
            return c
    return None


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (started detached by us and not reaped) is not running
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _state(c: dict[str, Any]) -> dict[str, Any]:
    exit_file = _dir() / f"{c['Id']}.exit"
    ended = read_json(exit_file) if exit_file.exists() else None
    running = ended is None and _alive(c["State"]["Pid"])
    code = (ended or {}).get("exit_code", 0 if running else 137)
    return {
        **c["State"],
        "Status": "running" if running else "exited",
        "Running": running,
        "ExitCode": 0 if running else (code if code >= 0 else 128 - code),
        "Pid": c["State"]["Pid"] if running else 0,
    }


def _lookup(obj: Any, path: str) -> Any:
    for part in [p for p in path.split(".") if p]:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def render_format(fmt: str, obj: dict[str, Any]) -> str:
    """Go-template subset: ``{{.A.B}}`` and ``{{json .A.B}}``."""

    def one(m: re.Match[str]) -> str:
        fn, path = (m.group(1) or "").strip(), m.group(2)
        value = _lookup(obj, path)
        if fn == "json":
            return json.dumps(value, separators=(",", ":"))
        return "" if value is None else str(value)

    out = re.sub(r"\{\{\s*(json\s+)?(\.[\w.]*)\s*\}\}", one, fmt)
    if "{{" in out:
        raise CliError(f"template: unsupported in the simulator: {fmt!r}")
    return out


def cmd_run(args: list[str]) -> int:
    opts, image, command = parse_run(args)
    if image not in images():
        raise CliError(
            f"Unable to find image '{image}' locally\n"
            f"docker: Error response from daemon: pull access denied for {image} (sim: no registry)"
        )
    name = (opts.get("name") or [""])[-1]
    if name and _find(name):
        raise CliError(
            f'docker: Error response from daemon: Conflict. The container name "/{name}" is already in use.'
        )
    if (
        len(command) < 2
        or os.path.basename(command[0]) != "vllm"
        or command[1] != "serve"
    ):
        raise CliError(
            f"sim image runs only 'vllm serve …', got {command[:2]!r}", code=127
        )
    env: dict[str, str] = {}
    for item in opts.get("env", []):
        k, eq, v = item.partition("=")
        if eq:
            env[k] = v
        elif k in os.environ:
            env[k] = os.environ[k]
    # the agent's interpreter (SIM_PYTHON): the one with the sim engine's dependencies
    python = os.environ.get("SIM_PYTHON") or sys.executable
    cid = hashlib.sha256(f"{name}{time.time_ns()}".encode()).hexdigest()
    log = _dir() / f"{cid}.log"
    child_env = {
        **env,
        "PATH": os.pathsep.join([str(SIM_BIN), "/usr/bin", "/bin"]),
        "PYTHONPATH": str(REPO),
        "SIM_NODE": os.environ.get("SIM_NODE") or os.environ.get("NODE_NAME", ""),
        "SIM_STATE_DIR": os.environ.get("SIM_STATE_DIR", ""),
        "SIM_PYTHON": python,
        "HOSTNAME": cid[:12],
    }
    argv = [
        python,
        str(RUNNER),
        str(_dir() / f"{cid}.exit"),
        "--",
        python,
        "-m",
        "engine.sim.vllm",
        "serve",
        *command[2:],
    ]
    detach = opts.get("detach") == ["true"]
    devices = [
        {
            "PathOnHost": d.split(":")[0],
            "PathInContainer": d.split(":")[-1],
            "CgroupPermissions": "rwm",
        }
        for d in opts.get("device", [])
    ]
    record: dict[str, Any] = {
        "Id": cid,
        "Name": f"/{name or cid[:12]}",
        "Image": image,
        "Config": {
            "Image": image,
            "Labels": dict(x.partition("=")[::2] for x in opts.get("label", [])),
            "Env": [f"{k}={v}" for k, v in env.items()],
            "Cmd": command,
        },
        "HostConfig": {
            "NetworkMode": (opts.get("network") or ["bridge"])[-1],
            "Devices": devices,
            "Binds": opts.get("volume", []),
            "ShmSize": (opts.get("shm-size") or ["64m"])[-1],
            "RestartPolicy": {
                "Name": (opts.get("restart") or ["no"])[-1].split(":")[0]
            },
            "AutoRemove": opts.get("rm") == ["true"],
        },
        "State": {
            "Status": "running",
            "Pid": 0,
            "StartedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            env=child_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,
        )
    record["State"]["Pid"] = proc.pid
    write_json(_dir() / f"{cid}.json", record)
    if detach:
        print(cid)
        return 0
    code = proc.wait()
    sys.stdout.write(log.read_text(encoding="utf-8", errors="replace"))
    if record["HostConfig"]["AutoRemove"]:
        _remove(record)
    return code if code >= 0 else 128 - code


def _remove(c: dict[str, Any]) -> None:
    for suffix in (".json", ".exit", ".log"):
        (_dir() / f"{c['Id']}{suffix}").unlink(missing_ok=True)


def _signal(c: dict[str, Any], sig: int) -> None:
    try:
        os.kill(c["State"]["Pid"], sig)
    except ProcessLookupError:
        pass


def cmd_stop(args: list[str]) -> int:
    grace, names, i = 10.0, [], 0
    while i < len(args):
        if args[i] in ("--time", "-t", "--timeout"):
            grace, i = float(args[i + 1]), i + 2
        elif args[i].startswith("--time="):
            grace, i = float(args[i].split("=", 1)[1]), i + 1
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


def _format_arg(args: list[str]) -> tuple[str, list[str]]:
    fmt, rest, i = "", [], 0
    while i < len(args):
        if args[i] in ("--format", "-f"):
            fmt, i = args[i + 1], i + 2
        elif args[i].startswith("--format="):
            fmt, i = args[i].split("=", 1)[1], i + 1
        elif args[i] == "--type":
            i += 2
        else:
            rest.append(args[i])
            i += 1
    return fmt, rest


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
            tail, i = args[i + 1], i + 2
        else:
            refs.append(args[i])
            i += 1
    c = _find(refs[0]) if refs else None
    if c is None:
        raise CliError(
            f"Error response from daemon: No such container: {refs[:1]}", code=1
        )
    lines = (
        (_dir() / f"{c['Id']}.log")
        .read_text(encoding="utf-8", errors="replace")
        .splitlines()
    )
    if tail not in (None, "all"):
        lines = lines[-int(tail) :] if int(tail) else []
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


def main(argv: list[str]) -> int:
    prog = os.path.basename(sys.argv[0]) or "docker"
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
            raise CliError(
                f"{prog}: '{cmd}' is not a {prog} command (in the simulator).", code=1
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

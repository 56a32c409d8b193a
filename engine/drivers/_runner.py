"""Tiny supervisor the process driver puts between itself and the engine.

Usage: ``python _runner.py EXIT_FILE -- ARGV...``

It runs ARGV as its child (same stdio, env and cwd), forwards TERM/INT/HUP to it,
and when the child ends writes ``{"exit_code", "pid", "ended_at"}`` to EXIT_FILE
(atomically), then exits with the same status. That way the engine's exit code
survives a restart of the agent that started it. ``exit_code`` follows
``subprocess`` conventions: negative N means "killed by signal N"; 127/126 mean
the program could not be found/executed.

Run by file path with the standard library only, so the engine's PYTHONPATH is
left exactly as the launch plan set it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from types import FrameType


def _write_exit(path: str, exit_code: int, pid: int | None) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"exit_code": exit_code, "pid": pid, "ended_at": time.time()}, f)
    os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one


def main(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        print("usage: _runner.py EXIT_FILE -- ARGV...", file=sys.stderr)
        return 2
    exit_file, argv = args[0], args[2:]
    try:
        child = subprocess.Popen(
            argv
        )  # inherits stdout/stderr (the engine log), env and cwd
    except FileNotFoundError as e:
        print(
            f"engine runner: cannot execute {argv[0]!r}: {e.strerror}",
            file=sys.stderr,
            flush=True,
        )
        _write_exit(exit_file, 127, None)
        return 127
    except PermissionError as e:
        print(
            f"engine runner: cannot execute {argv[0]!r}: {e.strerror}",
            file=sys.stderr,
            flush=True,
        )
        _write_exit(exit_file, 126, None)
        return 126

    def forward(signum: int, _frame: FrameType | None) -> None:
        # stay alive until the child is gone, so its exit code gets recorded
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    code = child.wait()
    _write_exit(exit_file, code, child.pid)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

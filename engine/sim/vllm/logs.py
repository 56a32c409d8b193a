"""Log lines in vLLM's format: ``(APIServer pid=N) INFO 12-02 18:40:47
[api_server.py:1234] message``.
"""

from __future__ import annotations

import os
import sys
import time

LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


class VllmLog:
    """Writes vLLM-style lines to stdout (vLLM's default handler), flushing each.

    Lines below ``VLLM_LOGGING_LEVEL`` (INFO unless set, as in vLLM) are dropped.
    """

    def __init__(self, process: str) -> None:
        self.process = process  # "APIServer", "EngineCore_DP1", …
        level = os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper()
        self.threshold = LEVELS.get(level, LEVELS["INFO"])

    def line(self, level: str, where: str, message: str) -> None:
        """One log line; ``where`` is "file.py:line" as vLLM prints it."""
        if LEVELS.get(level, LEVELS["INFO"]) < self.threshold:
            return
        stamp = time.strftime("%m-%d %H:%M:%S")
        sys.stdout.write(
            f"({self.process} pid={os.getpid()}) {level} {stamp} [{where}] {message}\n"
        )
        sys.stdout.flush()

    def debug(self, where: str, message: str) -> None:
        self.line("DEBUG", where, message)

    def info(self, where: str, message: str) -> None:
        self.line("INFO", where, message)

    def warning(self, where: str, message: str) -> None:
        self.line("WARNING", where, message)

    def error(self, where: str, message: str) -> None:
        self.line("ERROR", where, message)


def uvicorn(message: str) -> None:
    """Uvicorn's own lines (``INFO:     Started server process [1]``), to stderr."""
    sys.stderr.write(f"INFO:     {message}\n")
    sys.stderr.flush()

"""The one error type of the fake ``docker``: a message for stderr and docker's exit status.

Its own module because every subcommand raises it and ``main`` prints it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class CliError(Exception):
    def __init__(self, message: str, code: int = 125) -> None:
        super().__init__(message)
        self.code = code


def flag_value(args: list[str], i: int) -> str:
    """The value after flag ``args[i]``, or docker's error when the flag ends the line
    (the same words as ``docker run``'s: engine.sim.docker_cli.grammar)."""
    if i + 1 >= len(args):
        raise CliError(f"flag needs an argument: {args[i]}")
    return args[i + 1]


def number(flag: str, value: str, kind: Callable[[str], T]) -> T:
    """``value`` as a number, or docker's error naming the flag."""
    try:
        return kind(value)
    except ValueError:
        raise CliError(f'invalid argument "{value}" for "{flag}" flag') from None

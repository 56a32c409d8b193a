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
    """The value after flag ``args[i]``, or docker's error when the flag ends the line.

    docker parses flags with spf13/pflag: ``flag.go`` parseLongArg fails with
    ``"flag needs an argument: %s"`` (the flag as typed), exit 125 through docker's
    flag-error handler; ``docker run``'s grammar (engine.sim.docker_cli.grammar) says
    the same."""
    if i + 1 >= len(args):
        raise CliError(f"flag needs an argument: {args[i]}")
    return args[i + 1]


def number(flag: str, value: str, kind: Callable[[str], T]) -> T:
    """``value`` as a number, or docker's error naming the flag.

    pflag's ``FlagSet.Set`` says ``"invalid argument %q for %q flag: %v"`` with the
    flag as ``-t, --timeout`` and Go's strconv reason after the colon; the sim keeps
    the words up to ``flag`` and names the flag as typed."""
    try:
        return kind(value)
    except ValueError:
        raise CliError(f'invalid argument "{value}" for "{flag}" flag') from None

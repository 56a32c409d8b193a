"""The one error type of the fake ``docker``: a message for stderr and docker's exit status.

Its own module because every subcommand raises it and ``main`` prints it.
"""

from __future__ import annotations


class CliError(Exception):
    def __init__(self, message: str, code: int = 125) -> None:
        super().__init__(message)
        self.code = code

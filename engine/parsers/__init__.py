"""Parsers for the text that Ascend tools print (npu-smi, hccn_tool).

Every parser takes the tool's stdout as one string and returns dataclasses.
Output it does not recognise raises ParseError naming the line; output that
says the driver lacks the command (old npu-smi without ``-t hccs``) raises
Unsupported. Parsers never return a silent zero for something they could not
read.
"""

from __future__ import annotations


def split_lines(text: str) -> list[str]:
    """Split tool output into lines; line N of the result is line N+1 in errors."""
    return text.replace("\r\n", "\n").split("\n")


class ParseError(Exception):
    """Tool output that does not match the known format.

    ``line`` is 1-based; ``line_text`` is that line of ``raw`` (or None).
    The message names both, so an operator sees what was printed.
    """

    def __init__(self, message: str, *, raw: str = "", line: int | None = None) -> None:
        self.message = message
        self.raw = raw
        self.line = line
        self.line_text: str | None = None
        if line is not None:
            lines = split_lines(raw)
            if 1 <= line <= len(lines):
                self.line_text = lines[line - 1]
            super().__init__(f"{message} at line {line}: {self.line_text!r}")
        else:
            super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        # keyword-only arguments do not survive the default pickling (Celery results)
        return (_rebuild_parse_error, (self.message, self.raw, self.line))


def _rebuild_parse_error(message: str, raw: str, line: int | None) -> ParseError:
    return ParseError(message, raw=raw, line=line)


class Unsupported(Exception):
    """The tool answered that this driver/device does not have the command.

    Example: ``npu-smi info -t hccs`` on a 23.0 driver prints an error or the
    usage text instead of counters.
    """

    def __init__(self, message: str, *, raw: str = "") -> None:
        self.message = message
        self.raw = raw
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_unsupported, (self.message, self.raw))


def _rebuild_unsupported(message: str, raw: str) -> Unsupported:
    return Unsupported(message, raw=raw)


__all__ = ["ParseError", "Unsupported", "split_lines"]

"""The walk over the lines of one ``npu-smi info`` table: width and separators, the
version line and headers, then chip and process rows in the order printed. What the
table has read so far lives in ``_InfoTable``; single rows are read by ``rows``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.parsers import ParseError
from engine.parsers._common import (
    check_npu_smi_unsupported,
    is_elision,
    numbered,
    require_text,
)
from engine.parsers.npu_smi_info.model import NpuChip, NpuProcess, NpuSmiInfo
from engine.parsers.npu_smi_info.rows import (
    _chip_line1,
    _chip_line2,
    _header_layout,
    _Layout,
    _Pending,
    _process_row,
)

_SEPARATOR = re.compile(r"^\+[-=+]*\+$")
_VERSION = re.compile(r"^npu-smi\s+\S+\s+Version:\s*(\S+)$")
_NO_PROCS = re.compile(r"^No running processes found in NPU (\d+)$")


def parse_info(text: str) -> NpuSmiInfo:
    """Parse ``npu-smi info``. Raises ParseError naming the line on anything unknown."""
    require_text(text, "npu-smi info")
    check_npu_smi_unsupported(text)
    table = _InfoTable(raw=text)
    for lineno, line in numbered(text):
        s = line.strip()
        if not s or is_elision(s) or s.startswith("[WARNING]"):
            continue
        table.check_width(s, lineno)
        if _SEPARATOR.match(s):
            table.require_no_pending()
            continue
        if len(s) < 2 or not (s.startswith("|") and s.endswith("|")):
            raise ParseError("unrecognized npu-smi info line", raw=text, line=lineno)
        cells = [c.strip() for c in s[1:-1].split("|")]
        if not table.read_header(cells, lineno):
            table.read_row(cells, lineno)
    return table.result()


@dataclass
class _InfoTable:
    """What parse_info has read of one ``npu-smi info`` table so far, line by line."""

    raw: str
    version: str | None = None
    layout: _Layout | None = None
    seen_first_header: bool = False
    in_processes: bool = False
    proc_columns: int = 0
    width: int | None = None
    pending: _Pending | None = None  # a chip's first row, waiting for its second
    chips: list[NpuChip] = field(default_factory=list)
    processes: list[NpuProcess] = field(default_factory=list)

    def check_width(self, s: str, lineno: int) -> None:
        """Refuse a line whose width differs from the table's (the first line sets it)."""
        # npu-smi pads every line to one width (98 on 910B, 116 wide, 106 on 310P);
        # only process rows may overflow (a long process name is not truncated)
        if self.width is None:
            self.width = len(s)
        elif len(s) != self.width and not (self.in_processes and "No running" not in s):
            raise ParseError(
                f"table line is {len(s)} characters wide, the table is {self.width}",
                raw=self.raw,
                line=lineno,
            )

    def require_no_pending(self) -> None:
        """Refuse a chip's first row left without its second."""
        if self.pending is not None:
            raise ParseError(
                "chip row without its second line", raw=self.raw, line=self.pending.line
            )

    def read_header(self, cells: list[str], lineno: int) -> bool:
        """Take the version line or a header (True); False leaves a data row to read_row."""
        if len(cells) == 1 and cells[0].startswith("npu-smi"):
            m = _VERSION.match(cells[0])
            if not m:
                raise ParseError(
                    "unrecognized npu-smi version line", raw=self.raw, line=lineno
                )
            self.version = m.group(1)
            return True
        first = cells[0].split()
        if first[:2] == ["NPU", "Name"]:
            if len(cells) != 3 or not cells[1].startswith("Health"):
                raise ParseError(
                    "unsupported npu-smi info header layout", raw=self.raw, line=lineno
                )
            self.seen_first_header = True
            return True
        if (
            first
            and first[0] == "Chip"
            and self.seen_first_header
            and not self.in_processes
        ):
            self.layout = _header_layout(cells, first, self.raw, lineno)
            return True
        if (
            first[:2] == ["NPU", "Chip"]
            and len(cells) >= 2
            and cells[1] == "Process id"
        ):
            self.start_processes(cells, lineno)
            return True
        if first[:2] == ["NPU", "ID"]:
            raise ParseError(
                "unsupported npu-smi info layout (950-style header)",
                raw=self.raw,
                line=lineno,
            )
        return False

    def start_processes(self, cells: list[str], lineno: int) -> None:
        """Switch to the process table, whose header sets its 4 or 5 columns."""
        self.require_no_pending()
        self.in_processes = True
        self.proc_columns = len(cells)
        if self.proc_columns not in (4, 5):
            raise ParseError(
                "unsupported process table header", raw=self.raw, line=lineno
            )

    def read_row(self, cells: list[str], lineno: int) -> None:
        """A process row, or a chip's first or second row."""
        if self.in_processes:
            if len(cells) == 1 and _NO_PROCS.match(cells[0]):
                return
            self.processes.append(
                _process_row(cells, self.proc_columns, self.raw, lineno)
            )
            return
        if self.layout is None:
            raise ParseError(
                "data row before the npu-smi info header", raw=self.raw, line=lineno
            )
        if self.pending is None:
            self.pending = _chip_line1(cells, self.raw, lineno)
        else:
            self.chips.append(
                _chip_line2(self.pending, cells, self.layout, self.raw, lineno)
            )
            self.pending = None

    def result(self) -> NpuSmiInfo:
        """The table read, once it has a complete header and at least one chip."""
        self.require_no_pending()
        if self.layout is None:
            raise ParseError("no npu-smi info table header found", raw=self.raw)
        if not self.chips:
            raise ParseError(
                "npu-smi info table has no chip rows",
                raw=self.raw,
                line=self.layout.header_line,
            )
        return NpuSmiInfo(
            version=self.version, chips=self.chips, processes=self.processes
        )

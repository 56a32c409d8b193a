"""Parse ``npu-smi info -t topo``, ``-t hccs-bw`` and the ``npu-smi info watch`` stream.

- ``-t topo``: an NPU x NPU matrix of ``X``/``HCCS``/``PIX``/``PXB``/``PHB``/``SYS``/
  ``NA`` plus a ``CPU Affinity`` column, then a Legend. Real output starts the header
  with a TAB (ms-swift sample ``npu-smi-info-t-topo-910b3-8card.txt``); a blog copy has
  it stripped (``npu-smi-info-t-topo-910b1-8card.txt``). Both are accepted.
- ``-t hccs-bw -i N -c C``: no public capture; the format is the tool's source,
  hicann/driver npucli ``printf_hccs_bandwidth_info``: header
  ``"%-30s %-30s %-30s"`` (``hccs link``, ``tx_bandwidth(GB/S)``,
  ``rx_bandwidth(GB/S)``), then ``"%-35d %-30.6f %-30.6f"`` per link (PCS 1..7 on 910B)
  and a ``total`` row. ORIENT_CH builds print ``xlink link`` in the header.
- ``watch``: ``print_npu_watch_header`` prints ``NpuID(Idx)  ChipId(Idx)`` and one
  12-wide column per metric (``Pwr(W) Temp(C) AI Core(%) AI Cpu(%) Ctrl Cpu(%)
  Memory(%) Memory BW(%)``; newer builds add ``NPU Util(%)``, ``AI Cube(%)``; the 950
  has no ChipId column). Data lines carry trailing spaces; A3 chip 1 prints power
  as ``-``. Samples: ``npu-smi-info-watch-i2-910b3.txt`` (NeutronAscend README, with a
  3-space markdown indent) and ``npu-smi-info-watch-950-doc-example.txt``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.parsers import ParseError
from engine.parsers._common import (
    NOT_AVAILABLE,
    check_npu_smi_unsupported,
    numbered,
    require_text,
)

TOPO_KINDS = frozenset(
    {"X", "HCCS", "PIX", "PXB", "PHB", "SYS", "NA", "SIO", "HCCS_SW"}
)


# ------------------------------------------------------------------ topo


@dataclass(frozen=True)
class Topology:
    """``links[i][j]`` is the connection kind from NPU i to NPU j (``X`` on the diagonal)."""

    npus: list[int]
    links: list[list[str]]
    cpu_affinity: list[str | None]

    def kind(self, a: int, b: int) -> str:
        return self.links[self.npus.index(a)][self.npus.index(b)]

    def hccs_peers(self, npu: int) -> list[int]:
        row = self.links[self.npus.index(npu)]
        return [self.npus[j] for j, k in enumerate(row) if k == "HCCS"]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_NPU_LABEL = re.compile(r"^NPU(\d+)$")


def parse_topo(text: str) -> Topology:
    """Parse ``npu-smi info -t topo``; ParseError names the line it cannot read."""
    require_text(text, "npu-smi info -t topo")
    check_npu_smi_unsupported(text)
    header: list[int] | None = None
    has_affinity = False
    rows: dict[int, tuple[list[str], str | None]] = {}
    for lineno, line in numbered(text):
        s = line.strip()
        if not s:
            if header is not None and rows:
                break  # the Legend follows
            continue
        cells = s.split()
        if header is None:
            has_affinity = s.endswith("CPU Affinity")
            labels = cells[:-2] if has_affinity else cells
            ids = [_NPU_LABEL.match(c) for c in labels]
            if not labels or not all(ids):
                raise ParseError(
                    "expected the 'NPU0 NPU1 ...' header", raw=text, line=lineno
                )
            header = [int(m.group(1)) for m in ids if m]
            continue
        m = _NPU_LABEL.match(cells[0])
        if not m:
            raise ParseError("expected a row starting with NPUn", raw=text, line=lineno)
        kinds = cells[1 : 1 + len(header)]
        if len(kinds) != len(header) or not all(k in TOPO_KINDS for k in kinds):
            raise ParseError(
                f"expected {len(header)} link kinds ({', '.join(sorted(TOPO_KINDS))})",
                raw=text,
                line=lineno,
            )
        rest = cells[1 + len(header) :]
        if len(rest) > 1:
            raise ParseError("unexpected extra columns", raw=text, line=lineno)
        rows[int(m.group(1))] = (kinds, rest[0] if rest else None)
    if header is None:
        raise ParseError("no topology header in npu-smi output", raw=text)
    if sorted(rows) != sorted(header):
        raise ParseError(
            f"rows for NPUs {sorted(rows)} but the header lists {header}", raw=text
        )
    return Topology(
        npus=header,
        links=[rows[n][0] for n in header],
        cpu_affinity=[rows[n][1] for n in header],
    )


# ------------------------------------------------------------------ hccs-bw


@dataclass(frozen=True)
class HccsBandwidthLink:
    link: int  # PCS index as printed (1..7 on 910B)
    tx_gbps: float
    rx_gbps: float


@dataclass(frozen=True)
class HccsBandwidth:
    links: list[HccsBandwidthLink] = field(default_factory=list)
    total_tx_gbps: float = 0.0
    total_rx_gbps: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_BW_HEADER = re.compile(
    r"^(hccs|xlink) link\s+tx_bandwidth\(GB/S\)\s+rx_bandwidth\(GB/S\)$", re.I
)
_NUMBER = re.compile(r"^\d+(\.\d+)?$")


def parse_hccs_bw(text: str) -> HccsBandwidth:
    """Parse ``npu-smi info -t hccs-bw``. Raises Unsupported on an error/usage answer."""
    require_text(text, "npu-smi info -t hccs-bw")
    check_npu_smi_unsupported(text)
    seen_header = False
    links: list[HccsBandwidthLink] = []
    total: tuple[float, float] | None = None
    for lineno, line in numbered(text):
        s = line.strip()
        if not s:
            continue
        if not seen_header:
            if not _BW_HEADER.match(" ".join(s.split())):
                raise ParseError(
                    "expected 'hccs link tx_bandwidth(GB/S) rx_bandwidth(GB/S)'",
                    raw=text,
                    line=lineno,
                )
            seen_header = True
            continue
        cells = s.split()
        if len(cells) != 3 or not all(_NUMBER.match(c) for c in cells[1:]):
            raise ParseError("expected 'link tx_GB/s rx_GB/s'", raw=text, line=lineno)
        tx, rx = float(cells[1]), float(cells[2])
        if cells[0] == "total":
            total = (tx, rx)
        elif cells[0].isdigit():
            links.append(HccsBandwidthLink(int(cells[0]), tx, rx))
        else:
            raise ParseError("expected a link number or 'total'", raw=text, line=lineno)
    if total is None:
        raise ParseError("npu-smi hccs-bw output lacks the 'total' row", raw=text)
    return HccsBandwidth(links=links, total_tx_gbps=total[0], total_rx_gbps=total[1])


# ------------------------------------------------------------------ watch


@dataclass(frozen=True)
class WatchRow:
    npu: int
    chip: int | None  # None on builds without a ChipId column (950)
    values: dict[str, float | None]  # column header -> value; "-"/NA -> None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_WATCH_COLUMNS = (
    "NpuID(Idx)",
    "ChipId(Idx)",
    "Pwr(W)",
    "Temp(C)",
    "AI Core(%)",
    "AI Cpu(%)",
    "Ctrl Cpu(%)",
    "Memory(%)",
    "Memory BW(%)",
    "NPU Util(%)",
    "AI Cube(%)",
)


def _watch_header(s: str) -> list[str] | None:
    """Column names of a watch header line (they contain spaces), or None."""
    if not s.startswith("NpuID(Idx)"):
        return None
    names: list[str] = []
    rest = s
    while rest:
        rest = rest.lstrip()
        for name in _WATCH_COLUMNS:
            if rest.startswith(name):
                names.append(name)
                rest = rest[len(name) :]
                break
        else:
            return None if not rest else names + [rest.strip()]
    return names


class WatchParser:
    """Incremental parser for the ``npu-smi info watch`` stream: feed lines as they come.

    The header may repeat (the tool reprints it); rows before any header raise.
    """

    def __init__(self) -> None:
        self.columns: list[str] | None = None
        self._lineno = 0

    def feed(self, line: str) -> WatchRow | None:
        self._lineno += 1
        s = line.strip()
        if not s:
            return None
        header = _watch_header(s)
        if header is not None:
            unknown = [c for c in header if c not in _WATCH_COLUMNS]
            if unknown:
                raise ParseError(
                    f"unknown watch column {unknown[0]!r}", raw=line, line=1
                )
            self.columns = header
            return None
        if self.columns is None:
            raise ParseError("watch data before its header", raw=line, line=1)
        cells = s.split()
        if len(cells) != len(self.columns):
            raise ParseError(
                f"{len(cells)} values where the header has {len(self.columns)} columns",
                raw=line,
                line=1,
            )
        values: dict[str, float | None] = {}
        for name, cell in zip(self.columns, cells, strict=True):
            if cell in NOT_AVAILABLE:
                values[name] = None
            elif _NUMBER.match(cell):
                values[name] = float(cell)
            else:
                raise ParseError(f"{name}: {cell!r} is not a number", raw=line, line=1)
        npu = values.pop("NpuID(Idx)")
        chip = values.pop("ChipId(Idx)", None)
        if npu is None:
            raise ParseError("NpuID(Idx) is missing", raw=line, line=1)
        return WatchRow(
            npu=int(npu), chip=None if chip is None else int(chip), values=values
        )


def parse_watch(text: str) -> list[WatchRow]:
    """Parse a captured ``npu-smi info watch`` stream; ParseError names the line."""
    require_text(text, "npu-smi info watch")
    check_npu_smi_unsupported(text)
    parser = WatchParser()
    rows: list[WatchRow] = []
    for lineno, line in numbered(text):
        try:
            row = parser.feed(line)
        except ParseError as exc:
            raise ParseError(exc.message, raw=text, line=lineno) from None
        if row is not None:
            rows.append(row)
    if parser.columns is None:
        raise ParseError("no watch header in npu-smi output", raw=text)
    return rows

"""Parse ``hccn_tool -i N -<cmd> -g`` output (the RoCE NIC tool on Atlas A2).

Formats follow real captures where they exist (tests/data/ascend/hccn_tool-*.txt)
and the tool's source otherwise (hicann/driver src/custom/network/hccn/ascend910B,
ascend-facts.md §3). Pasted copies may be indented and may elide lines with
``...``; both are tolerated.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.parsers import ParseError
from engine.parsers._common import is_elision, numbered, require_text

# tool_ops.c:36-47
NET_HEALTH_STATES = (
    "Success",
    "Socket fail",
    "Receive timeout",
    "Unreachable",
    "Time exceeded",
    "Fault",
    "Init",
    "Thread error",
    "Detect ip set",
    "Unknown",
)


def _content(text: str, tool: str) -> list[tuple[int, str]]:
    """Non-blank, non-elided lines, stripped, with their 1-based numbers."""
    require_text(text, tool)
    lines = [
        (n, line.strip())
        for n, line in numbered(text)
        if line.strip() and not is_elision(line.strip())
    ]
    if not lines:
        raise ParseError(f"no content in {tool} output", raw=text)
    return lines


def _single_value(text: str, prefix: str, tool: str) -> tuple[str, int]:
    lines = _content(text, tool)
    for lineno, s in lines:
        if not s.startswith(prefix):
            raise ParseError(f"unrecognized {tool} output", raw=text, line=lineno)
    if len(lines) != 1:
        raise ParseError(
            f"expected one '{prefix}' line, found {len(lines)}",
            raw=text,
            line=lines[1][0],
        )
    lineno, s = lines[0]
    return s[len(prefix) :].strip(), lineno


def parse_link(text: str) -> str:
    """``-link -g`` → "UP" or "DOWN" (``link status: UP``, tool_ops.c:1764)."""
    value, lineno = _single_value(text, "link status:", "hccn_tool -link")
    if value not in ("UP", "DOWN"):
        raise ParseError(f"unknown link status {value!r}", raw=text, line=lineno)
    return value


def parse_net_health(text: str) -> str:
    """``-net_health -g`` → one of NET_HEALTH_STATES ("Success" is healthy)."""
    value, lineno = _single_value(text, "net health status:", "hccn_tool -net_health")
    if value not in NET_HEALTH_STATES:
        raise ParseError(f"unknown net health status {value!r}", raw=text, line=lineno)
    return value


def parse_stat(text: str) -> dict[str, int]:
    """``-stat -g`` → counters: ``packet statistics:`` then ``name:value`` lines."""
    lines = _content(text, "hccn_tool -stat")
    if lines[0][1] != "packet statistics:":
        raise ParseError("expected 'packet statistics:'", raw=text, line=lines[0][0])
    counters: dict[str, int] = {}
    for lineno, s in lines[1:]:
        m = re.fullmatch(r"([a-z0-9_]+):\s*(\d+)", s)
        if not m:
            raise ParseError("expected 'counter_name:value'", raw=text, line=lineno)
        if m.group(1) in counters:
            raise ParseError(f"duplicate counter {m.group(1)!r}", raw=text, line=lineno)
        counters[m.group(1)] = int(m.group(2))
    if not counters:
        raise ParseError(
            "no counters after 'packet statistics:'", raw=text, line=lines[0][0]
        )
    return counters


@dataclass(frozen=True)
class LinkStat:
    """``-link_stat -g`` flap history: records (asctime, "UP"|"DOWN"), newest first."""

    up_count: int
    down_count: int | None  # older drivers ([device N] format) do not print it
    records: list[tuple[str, str]] = field(default_factory=list)
    device: int | None = None
    current_time: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["records"] = [list(r) for r in self.records]
        return d


_LINK_STAT_LINE = re.compile(r"^\[(?:devid|device) (\d+)\](.*)$")
_LINK_RECORD = re.compile(
    r"^(\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})\s+LINK (UP|DOWN)$"
)


def parse_link_stat(text: str) -> LinkStat:
    """Parse ``[devid N]`` (tool.c tool_display_link_his_stat) or ``[device N]``."""
    device: int | None = None
    fields: dict[str, str] = {}
    records: list[tuple[str, str]] = []
    for lineno, s in _content(text, "hccn_tool -link_stat"):
        m = _LINK_STAT_LINE.match(s)
        if not m:
            raise ParseError("expected '[devid N]...' line", raw=text, line=lineno)
        if device is not None and int(m.group(1)) != device:
            raise ParseError(
                "device id changes within one output", raw=text, line=lineno
            )
        device = int(m.group(1))
        rest = m.group(2).strip()
        rec = _LINK_RECORD.match(rest)
        if rec:
            records.append((rec.group(1), rec.group(2)))
            continue
        key, sep, value = rest.partition(":")
        key = key.strip()
        if not sep or key not in (
            "current time",
            "link up count",
            "link down count",
            "link change records",
        ):
            raise ParseError("unrecognized link_stat line", raw=text, line=lineno)
        if key in ("link up count", "link down count") and not value.strip().isdigit():
            raise ParseError(f"{key}: expected an integer", raw=text, line=lineno)
        fields[key] = value.strip()
    if "link up count" not in fields:
        raise ParseError("link_stat output lacks 'link up count'", raw=text)
    down = fields.get("link down count")
    return LinkStat(
        up_count=int(fields["link up count"]),
        down_count=int(down) if down is not None else None,
        records=records,
        device=device,
        current_time=fields.get("current time"),
    )


@dataclass(frozen=True)
class IpInfo:
    """``-ip -g``: the NPU's RoCE address."""

    ipaddr: str
    netmask: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_ip(text: str) -> IpInfo:
    """``ipaddr:%s`` / ``netmask:%s`` (tool_ops_ext.c:1337). Both must be valid IPv4."""
    values: dict[str, str] = {}
    for lineno, s in _content(text, "hccn_tool -ip"):
        key, sep, value = s.partition(":")
        if not sep or key not in ("ipaddr", "netmask") or key in values:
            raise ParseError("expected 'ipaddr:' or 'netmask:'", raw=text, line=lineno)
        try:
            ipaddress.IPv4Address(value.strip())
        except ValueError:
            raise ParseError(
                f"{key}: not an IPv4 address", raw=text, line=lineno
            ) from None
        values[key] = value.strip()
    if set(values) != {"ipaddr", "netmask"}:
        raise ParseError("hccn_tool -ip output needs both ipaddr and netmask", raw=text)
    return IpInfo(ipaddr=values["ipaddr"], netmask=values["netmask"])


_TLV_HEADER = re.compile(r"^[A-Z][A-Za-z0-9 ]* TLV$")


def _tlv_key(header: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", header[: -len(" TLV")].lower()).strip("_")


def parse_lldp(text: str) -> dict[str, str]:
    """``-lldp -g`` (lldptool-style TLV blocks) → flat dict.

    Keys: ``chassis_id`` (+ ``chassis_id_subtype``, e.g. "MAC"), ``port_id``
    (+ ``port_id_subtype``, e.g. "Ifname"), ``system_name``,
    ``system_description`` (lines joined by "\\n"), ``system_capabilities``,
    ``management_address``, ``maximum_frame_size`` and any other TLV by its
    lower-cased name. Elided values ("MAC: ...") stay as "...".
    """
    require_text(text, "hccn_tool -lldp")
    bodies: dict[str, list[str]] = {}
    current: str | None = None
    for lineno, line in numbered(text):
        s = line.strip()
        if not s:
            continue
        if _TLV_HEADER.match(s):
            current = _tlv_key(s)
            if current in bodies:
                raise ParseError(f"duplicate {s!r}", raw=text, line=lineno)
            bodies[current] = []
            continue
        if current is None:
            raise ParseError("text before the first LLDP TLV", raw=text, line=lineno)
        if is_elision(s):
            continue
        bodies[current].append(s)
    if not bodies:
        raise ParseError("no LLDP TLVs in hccn_tool output", raw=text)
    result: dict[str, str] = {}
    for key, body in bodies.items():
        if key == "end_of_lldpdu":
            continue
        value = "\n".join(body)
        if key in ("chassis_id", "port_id") and len(body) == 1 and ": " in body[0]:
            subtype, _, value = body[0].partition(": ")
            result[f"{key}_subtype"] = subtype
        result[key] = value.strip()
    if "chassis_id" not in result or "port_id" not in result:
        raise ParseError("LLDP output lacks Chassis ID or Port ID TLV", raw=text)
    return result


def parse_optical(text: str) -> dict[str, str]:
    """``-optical -g``: ``optical info:`` then ``Key : value`` lines (tool.c:1568)."""
    lines = _content(text, "hccn_tool -optical")
    if lines[0][1] != "optical info:":
        raise ParseError("expected 'optical info:'", raw=text, line=lines[0][0])
    result: dict[str, str] = {}
    for lineno, s in lines[1:]:
        key, sep, value = s.partition(":")
        key = key.strip()
        if not sep or not key:
            raise ParseError("expected 'Key : value'", raw=text, line=lineno)
        if key in result:
            raise ParseError(f"duplicate key {key!r}", raw=text, line=lineno)
        result[key] = value.strip()
    if "present" not in result:
        raise ParseError("optical output lacks 'present'", raw=text, line=lines[0][0])
    return result


def parse_netdetect(text: str) -> str:
    """``-netdetect -g`` → the detect address (``netdetect address: 11.12.165.1``)."""
    value, lineno = _single_value(text, "netdetect address:", "hccn_tool -netdetect")
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ParseError(
            "netdetect address is not an IP address", raw=text, line=lineno
        ) from None
    return value


@dataclass(frozen=True)
class GatewayInfo:
    """``-gateway -g``: ``default gateway:11.12.165.1, Iface:eth0``."""

    gateway: str
    iface: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_gateway(text: str) -> GatewayInfo:
    """Parse ``-gateway -g``. Raises ParseError when the address is not an IP."""
    value, lineno = _single_value(text, "default gateway:", "hccn_tool -gateway")
    m = re.fullmatch(r"([^,\s]+)(?:,\s*Iface:\s*(\S+))?", value)
    if not m:
        raise ParseError(
            "expected 'default gateway:<ip>, Iface:<name>'", raw=text, line=lineno
        )
    try:
        ipaddress.ip_address(m.group(1))
    except ValueError:
        raise ParseError(
            "default gateway is not an IP address", raw=text, line=lineno
        ) from None
    return GatewayInfo(gateway=m.group(1), iface=m.group(2))


@dataclass(frozen=True)
class PingResult:
    """``-ping -g address <ip>``: loss as printed (percent), plus reply times in ms."""

    sent: int
    received: int
    loss_pct: float
    target: str | None = None
    rtt_ms: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_PING_HEAD = re.compile(r"^device (\d+) PING (\S+)$")
_PING_REPLY = re.compile(r"^recv seq=(\d+),time=(\d+(?:\.\d+)?)ms$")
_PING_SUMMARY = re.compile(
    r"^(\d+) packets transmitted, (\d+) received, (\d+(?:\.\d+)?)% packet loss$"
)


def parse_ping(text: str) -> PingResult:
    """Parse hccn_tool ping output; the summary line is required."""
    target: str | None = None
    rtts: list[float] = []
    summary: tuple[int, int, float] | None = None
    for lineno, s in _content(text, "hccn_tool -ping"):
        if summary is not None:
            raise ParseError("text after the ping summary", raw=text, line=lineno)
        if m := _PING_HEAD.match(s):
            target = m.group(2)
        elif m := _PING_REPLY.match(s):
            rtts.append(float(m.group(2)))
        elif m := _PING_SUMMARY.match(s):
            summary = (int(m.group(1)), int(m.group(2)), float(m.group(3)))
            if summary[1] > summary[0] or summary[2] > 100:
                raise ParseError("inconsistent ping summary", raw=text, line=lineno)
        else:
            raise ParseError("unrecognized hccn_tool ping line", raw=text, line=lineno)
    if summary is None:
        raise ParseError(
            "hccn_tool ping output has no 'packets transmitted' summary", raw=text
        )
    return PingResult(
        sent=summary[0],
        received=summary[1],
        loss_pct=summary[2],
        target=target,
        rtt_ms=rtts,
    )


__all__ = [
    "NET_HEALTH_STATES",
    "GatewayInfo",
    "IpInfo",
    "LinkStat",
    "PingResult",
    "parse_gateway",
    "parse_ip",
    "parse_link",
    "parse_link_stat",
    "parse_lldp",
    "parse_net_health",
    "parse_netdetect",
    "parse_optical",
    "parse_ping",
]

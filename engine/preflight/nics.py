"""The NPUs' own NICs as ``hccn_tool`` shows them (the vllm-ascend "verify
multi-node communication" steps): link, health, neighbours, IPs, ``/etc/hccn.conf``
and pings to the other nodes, read as a table of queries per NIC."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.checktext import item, join
from engine.drivers import node_driver
from engine.parsers import ParseError
from engine.parsers.hccn_tool import (
    parse_gateway,
    parse_ip,
    parse_link,
    parse_lldp,
    parse_net_health,
    parse_netdetect,
    parse_ping,
)
from engine.preflight.check import FAIL, PASS, Check, _tool

HCCN_CONF = "/etc/hccn.conf"

# The per-NIC hccn_tool queries, in the order run and reported: (check key, hccn_tool
# option, parser, the value that is healthy or None when parsing is the check).
NIC_QUERIES: tuple[tuple[str, str, Callable[[str], Any], str | None], ...] = (
    ("link", "-link", parse_link, "UP"),
    ("net_health", "-net_health", parse_net_health, "Success"),
    ("lldp", "-lldp", parse_lldp, None),
    ("netdetect", "-netdetect", parse_netdetect, None),
    ("gateway", "-gateway", parse_gateway, None),
)


def check_nics(
    npus: int, ping_targets: list[str]
) -> tuple[list[Check], list[str | None]]:
    """hccn_tool link / net_health / lldp / netdetect / gateway per NPU NIC, IPs, and pings."""
    failures: dict[str, list[str]] = {key: [] for key, _, _, _ in NIC_QUERIES}
    ips: list[str | None] = []
    for i in range(npus):
        _query_nic(i, failures)
        ips.append(_nic_ip(i))
    checks = _query_checks(failures, npus)
    checks.append(_hccn_conf_check())
    checks.append(_ips_check(ips))
    if ping_targets:
        checks.append(_ping_check(ping_targets))
    return checks, ips


def _query_nic(i: int, failures: dict[str, list[str]]) -> None:
    """Run every NIC_QUERIES row on NPU ``i``; a failed one adds a line under its key."""
    for key, cmd, parser, good in NIC_QUERIES:
        out, problem = _tool(["hccn_tool", "-i", str(i), cmd, "-g"])
        if out is None:
            failures[key].append(f"NPU {i}: {problem}")
            continue
        try:
            value: Any = parser(out)
        except ParseError as exc:
            failures[key].append(f"NPU {i}: {exc}")
            continue
        if good is not None and str(value).lower() != good.lower():
            failures[key].append(f"NPU {i}: {value}")


def _nic_ip(i: int) -> str | None:
    """The IP address of NPU ``i``'s NIC, or None when hccn_tool gives none."""
    out, problem = _tool(["hccn_tool", "-i", str(i), "-ip", "-g"])
    try:
        return parse_ip(out).ipaddr if out else None
    except ParseError:
        return None


def _query_checks(failures: dict[str, list[str]], npus: int) -> list[Check]:
    """One check per NIC_QUERIES key: its first 8 failures, or pass."""
    checks: list[Check] = []
    for key, problems in failures.items():  # fixes per key: engine/checktext.py
        if problems:
            checks.append(
                Check.of(f"hccn_{key}.bad", FAIL, problems="; ".join(problems[:8]))
            )
        else:
            checks.append(Check.of(f"hccn_{key}.ok", PASS, count=npus))
    return checks


def _hccn_conf_check() -> Check:
    conf = _hccn_conf_path()
    if conf.exists():
        return Check.of("hccn_conf.ok", PASS, path=conf)
    return Check.of("hccn_conf.missing", FAIL, path=conf)


def _ips_check(ips: list[str | None]) -> Check:
    missing_ips = [str(i) for i, ip in enumerate(ips) if not ip]
    return (
        Check.of("npu_ips.missing", FAIL, npus=", ".join(missing_ips))
        if missing_ips
        else Check.of("npu_ips.ok", PASS, ips=", ".join(ip or "" for ip in ips))
    )


def _ping_check(ping_targets: list[str]) -> Check:
    """Ping every target from NPU 0's NIC; fail naming the targets lost."""
    lost = []
    for target in ping_targets:
        out, problem = _tool(["hccn_tool", "-i", "0", "-ping", "-g", "address", target])
        if out is None:
            lost.append(item("item.target_problem", target=target, problem=problem))
            continue
        try:
            result = parse_ping(out)
        except ParseError as exc:
            lost.append(item("item.target_problem", target=target, problem=str(exc)))
            continue
        if result.received == 0:
            lost.append(item("item.ping_lost", target=target, sent=result.sent))
    return (
        Check.of("npu_ping.lost", FAIL, problems=join(lost))
        if lost
        else Check.of("npu_ping.ok", PASS, count=len(ping_targets))
    )


def _hccn_conf_path() -> Path:
    return node_driver().hccn_conf() or Path(HCCN_CONF)

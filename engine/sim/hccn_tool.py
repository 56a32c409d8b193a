"""Fake ``hccn_tool`` (910B RoCE NIC tool) for simulated nodes.

Prints the real formats (samples in shared/reference/ascend, tool source
hicann/driver ``network/hccn/ascend910B/hccn_tool``). Errors go to stderr like the
real ``TOOL_PRINT_ERR`` and the exit status is the real UDA error code & 0xff.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.sim import hardware, state

# UDA_* error codes of the real tool (exit status is the low byte)
EXIT_MAJOR_CMD_TYPE = 0x1001 & 0xFF
EXIT_MAJOR_CMD_INVALID = 0x1003 & 0xFF
EXIT_DEV_ID = 0x1004 & 0xFF
EXIT_PARAM_INVALID = 0x2001 & 0xFF
EXIT_OP_NOT_SUPPORT = 0x2003 & 0xFF
EXIT_CMD_COUNT = 0x2004 & 0xFF
EXIT_DSMI_EXE = 0x4001 & 0xFF
EXIT_IPCONF_NOT_PRESET = 0x400D & 0xFF
EXIT_LINK_DOWN = 0x4016 & 0xFF

KNOWN_CMDS = frozenset(
    "adapt_status arp auto_downgrade backpressure bad_thd bandwidth cdr cfg context cur_tc_buf dcqcn "
    "diagnostic down_data dscp_to_tc dump duplex esd eth_test fec fec_err gateway generic hccs_ping "
    "hilink_info hw_stats ip ip_route ip_rule link link_stat lldp local_lldp mac mem_reserve mtu neigh "
    "net_health netdetect optical optical_snr pci pcs pfc pfc_stat pfc_storm ping prio_tc process qp_info "
    "reg roce_test route scdr scdr_reset send_arp serdes shaping speed stat stat_extra status tc_cfg "
    "tc_qos tc_stat tls tlsca traceroute udhcpc udp version vnic xsfp_reset".split()
)
OPTION_HELP = {
    "ping": "   [-g]        : get the result of ping\n"
    "       address %s     : ip address of the destination\n"
    "       [pkt %d]       : number of packets, optional, default is 3\n",
}
GENERIC_HELP = "   [-g]        : get the information\n"
BOOT_AGE_S = (
    3 * 86400
)  # the sim's NICs came up three days before "now" unless events say otherwise


class ToolError(Exception):
    """A failure the real tool reports on stderr with ``exit_code``."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _params_help(cmd: str) -> str:
    return (
        f"[ hccn_tool -i devid -{cmd} ] needs the following parameters:\n"
        + OPTION_HELP.get(cmd, GENERIC_HELP)
    )


def _asctime(t: float) -> str:
    return time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(t))


def _gateway(ip: str) -> str:
    parts = ip.split(".")
    return ".".join(parts[:3] + ["254"]) if len(parts) == 4 else "0.0.0.0"


# ---------------------------------------------------------------- outputs


def out_link(faults: state.Faults) -> str:
    return f"link status: {'DOWN' if faults.roce_down else 'UP'}\n"


def out_net_health(faults: state.Faults) -> str:
    return f"net health status: {'Fault' if faults.roce_down else 'Success'}\n"


def out_stat(counters: dict[str, Any], npu: int) -> str:
    stats = hardware.roce_stats(counters, npu)
    return "packet statistics:\n" + "".join(f"{k}:{v}\n" for k, v in stats.items())


def out_link_stat(d: Path, npu: int, now: float) -> str:
    """``-link_stat -g``: counts and change records, newest first (tool_display_link_his_stat)."""
    events = state.load_link_events(d)
    boot = (
        min([e["time"] for e in events] + [now // 86400 * 86400]) - BOOT_AGE_S
    )  # stable within a day
    records = [{"time": boot, "event": "LINK UP"}] + events
    ups = sum(1 for e in records if e["event"] == "LINK UP")
    downs = len(records) - ups
    p = f"[devid {npu}]"
    lines = [
        f"{p}current time        : {_asctime(now)}",
        f"{p}link up count       : {ups}",
        f"{p}link down count     : {downs}",
        f"{p}link change records :",
    ]
    lines += [
        f"{p}    {_asctime(e['time'])}    {e['event']}" for e in reversed(records)
    ]
    return "\n".join(lines) + "\n"


def out_ip(cfg: state.NodeConfig, npu: int) -> str:
    if npu >= len(cfg.npu_ips):
        raise ToolError(
            "Get ipconf failed, because no ip was preset there!", EXIT_IPCONF_NOT_PRESET
        )
    return f"ipaddr:{cfg.npu_ips[npu]}\nnetmask:255.255.255.0\n"


def out_lldp(cfg: state.NodeConfig, npu: int) -> str:
    mgmt = _gateway(cfg.npu_ips[npu]) if npu < len(cfg.npu_ips) else "0.0.0.0"
    return (
        "Chassis ID TLV\n"
        f"\tMAC: 38:ad:be:00:10:{npu:02x}\n"
        "Port ID TLV\n"
        f"\tIfname: 400GE1/1/{npu + 1}:2\n"
        "System Description TLV\n"
        "\tVersatile Routing Platform Software\n"
        "VRP (R) software, Version 8.211 (DX511 V200R021C10SPC600)\n"
        "\n"
        "Huarong DX511\n"
        "\n"
        "System Capabilities TLV\n"
        "\tEnabled capabilities: Bridge, Router\n"
        "Management Address TLV\n"
        f"\tIPv4: {mgmt}\n"
        "Maximum Frame Size TLV\n"
        "\t9216\n"
        "End of LLDPDU TLV\n"
    )


def out_optical(faults: state.Faults, npu: int) -> str:
    rx = "0.0001" if faults.roce_down else f"{1.0189 + npu * 0.0113:.4f}"
    los = "0xff" if faults.roce_down else "0x0"
    rows = [
        ("present", "present"),
        ("temperature", f"{45 + npu % 3} C"),
        ("Vendor Name", "HUAWEI"),
        ("Vendor PN", "02313URA"),
        ("Vendor SN", f"2102313URA10N{npu:04d}"),
        ("xsfp identifier", "QSFP-DD"),
        ("xsfp wave length", "850 nm"),
        ("Tx Power", f"{1.4035 + npu * 0.0071:.4f} mW"),
        ("Rx Power", f"{rx} mW"),
        ("Vcc High Thres", "3465.00 mV"),
        ("Vcc Low Thres", "3135.00 mV"),
        ("Temp High Thres", "70 C"),
        ("Temp Low Thres", "0 C"),
        ("TxPower High Thres", "3.5481 mW"),
        ("TxPower Low Thres", "0.2818 mW"),
        ("RxPower High Thres", "3.5481 mW"),
        ("RxPower Low Thres", "0.1445 mW"),
        ("Tx Bias", "7.9360 mA"),
        ("Tx Los Flag", "0x0"),
        ("Rx Los Flag", los),
        ("Tx LoL Flag", "0x0"),
        ("Rx LoL Flag", los),
    ]
    return "optical info:\n" + "".join(f"{k:<21}: {v}\n" for k, v in rows)


def out_tls(npu: int) -> str:
    head = f"dev_id:{npu}, "
    certs = [
        ("pub cert", "/C=CN/ST=GD/O=HUAWEI/OU=2012/CN=2_1thCA", "03:19:21"),
        ("ca1 cert", "/C=CN/ST=GD/L=SZ/O=HUAWEI/CN=1thCA", "03:19:07"),
        ("ca2 cert", "/C=CN/ST=GD/L=SZ/O=HUAWEI/CN=1thCA", "03:19:10"),
    ]
    lines = [
        head
        + "tls switch[0](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), "
        "tls alarm time threshold[60]days"
    ]
    for name, issuer, hms in certs:
        lines += [
            f"{head}[{name}] info:",
            f"         issuer[{issuer}]",
            f"         start_time[Wed Feb 19 {hms} 2020 GMT]",
            f"         end_time[Sat Feb 16 {hms} 2030 GMT]",
        ]
    return "\n".join(lines) + "\n"


def ip_reachable(base: Path, ip: str) -> bool:
    """True if a sim node under ``base`` owns ``ip`` in its npu_ips and its RoCE links are up."""
    if not base.is_dir():
        return False
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        if ip in state.load_config(d).npu_ips:
            return not state.load_faults(d).roce_down
    return False


def out_ping(d: Path, npu: int, args: list[str], faults: state.Faults) -> str:
    opts = dict(zip(args[0::2], args[1::2], strict=False))
    if len(args) % 2 or "address" not in opts or set(opts) - {"address", "pkt"}:
        raise ToolError(
            "Get invalid parameters!\n" + _params_help("ping").rstrip("\n"),
            EXIT_PARAM_INVALID,
        )
    ip = opts["address"]
    if ip.count(".") != 3 or not all(
        p.isdigit() and int(p) < 256 for p in ip.split(".")
    ):
        raise ToolError("The ip address you configured is invalid!", 0x2006 & 0xFF)
    pkt = opts.get("pkt", "3")
    if not pkt.isdigit() or not 1 <= int(pkt) <= 1000:
        raise ToolError(
            "Get invalid parameters!\n" + _params_help("ping").rstrip("\n"),
            EXIT_PARAM_INVALID,
        )
    if faults.roce_down:
        raise ToolError("Execute failed: Link status is down.", EXIT_LINK_DOWN)
    n = int(pkt)
    lines = [f"device {npu} PING {ip}"]
    if ip_reachable(d.parent, ip):
        lines += [
            f"recv seq={i},time={0.034 + 0.002 * (i % 4) if i else 1.418:.6f}ms"
            for i in range(n)
        ]
        lines.append(f"{n} packets transmitted, {n} received, 0.00% packet loss")
    else:
        lines.append(f"{n} packets transmitted, 0 received, 100.00% packet loss")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- argv handling


def help_text() -> str:
    lines = []
    for cmd in (
        "link",
        "net_health",
        "stat",
        "link_stat",
        "ip",
        "lldp",
        "optical",
        "netdetect",
        "gateway",
        "ping",
        "tls",
        "fec",
    ):
        lines.append(f"hccn_tool -i devid -{cmd}")
        lines.append(OPTION_HELP.get(cmd, GENERIC_HELP).rstrip("\n"))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Get:
    """What one ``hccn_tool -i N -<cmd> -g`` reads: node dir, device, config, faults, clock."""

    d: Path
    npu: int
    cfg: state.NodeConfig
    faults: state.Faults
    now: float


def _get_lldp(q: Get) -> str:
    if q.faults.roce_down:  # no neighbour advertisements arrive on a dead port
        raise ToolError("Execute failed: Link status is down.", EXIT_LINK_DOWN)
    return out_lldp(q.cfg, q.npu)


def _get_netdetect(q: Get) -> str:
    ip = q.cfg.npu_ips[q.npu] if q.npu < len(q.cfg.npu_ips) else ""
    return f"netdetect address: {_gateway(ip) if ip else '0.0.0.0'}\n"


def _get_gateway(q: Get) -> str:
    if q.npu >= len(q.cfg.npu_ips):
        raise ToolError(
            "Get gateway failed, because no gateway was preset there!",
            0x4002 & 0xFF,
        )
    return f"default gateway:{_gateway(q.cfg.npu_ips[q.npu])}, Iface:eth{q.npu}\n"


def _get_not_modelled(q: Get) -> str:
    raise ToolError(
        "Command execute failed!", EXIT_DSMI_EXE
    )  # real command the sim does not model


# the -g commands the sim answers (ping, the one that takes parameters, is apart);
# any other command of KNOWN_CMDS is _get_not_modelled
GETS: dict[str, Callable[[Get], str]] = {
    "link": lambda q: out_link(q.faults),
    "net_health": lambda q: out_net_health(q.faults),
    "stat": lambda q: out_stat(state.load_counters(q.d), q.npu),
    "link_stat": lambda q: out_link_stat(q.d, q.npu, q.now),
    "ip": lambda q: out_ip(q.cfg, q.npu),
    "lldp": _get_lldp,
    "optical": lambda q: out_optical(q.faults, q.npu),
    "netdetect": _get_netdetect,
    "gateway": _get_gateway,
    "tls": lambda q: out_tls(q.npu),
    "fec": lambda q: "fec mode: rs FEC mode\n",
}


def dispatch(argv: list[str], d: Path) -> str:
    """Run one command on node dir ``d``; returns stdout text or raises ToolError."""
    _check_major(argv)
    if argv[0] == "-h":
        return help_text()
    cfg = state.load_config(d)
    npu, cmd, args = _parse_get(argv, cfg)
    faults = state.load_faults(d)
    if cmd == "ping":
        return out_ping(d, npu, args, faults)
    if args:
        raise _count_error(cmd)
    get = GETS.get(cmd, _get_not_modelled)
    return get(Get(d, npu, cfg, faults, time.time()))


def _check_major(argv: list[str]) -> None:
    """``-i`` (or ``-h``) must come first; ``-a`` (all devices) is not simulated."""
    if not argv or argv[0] not in ("-i", "-a", "-h"):
        raise ToolError(
            'Get invalid major cmd type. The valid major cmd type should be "-a" or "-i".\n'
            "Enter [ hccn_tool -h ] for more details.",
            EXIT_MAJOR_CMD_TYPE,
        )
    if argv[0] == "-a":
        raise ToolError(
            "Get invalid major cmd.\nEnter [ hccn_tool -h ] for more details.",
            EXIT_MAJOR_CMD_INVALID,
        )


def _parse_get(argv: list[str], cfg: state.NodeConfig) -> tuple[int, str, list[str]]:
    """(device, command, parameters after ``-g``) of ``-i N -<cmd> -g ...``; else ToolError."""
    if len(argv) < 2 or not argv[1].isdigit() or int(argv[1]) >= cfg.npu_count:
        raise ToolError("Get invalid device id.", EXIT_DEV_ID)
    npu = int(argv[1])
    if len(argv) < 3 or not argv[2].startswith("-") or argv[2][1:] not in KNOWN_CMDS:
        raise ToolError(
            "Get invalid major cmd.\nEnter [ hccn_tool -h ] for more details.",
            EXIT_MAJOR_CMD_INVALID,
        )
    cmd, rest = argv[2][1:], argv[3:]
    if not rest:
        raise _count_error(cmd)
    if rest[0] != "-g":  # the sim has no settable state: only get (-g) exists here
        raise ToolError(
            "Get unknown option!\n" + _params_help(cmd).rstrip("\n"),
            EXIT_OP_NOT_SUPPORT,
        )
    return npu, cmd, rest[1:]


def _count_error(cmd: str) -> ToolError:
    return ToolError(
        "The total count of input parameters is wrong!\n"
        + _params_help(cmd).rstrip("\n"),
        EXIT_CMD_COUNT,
    )


def run(argv: list[str], d: Path | None) -> tuple[int, str, str]:
    """Pure entry point: (exit status, stdout, stderr) of ``hccn_tool <argv>`` on node dir ``d``."""
    if d is None:
        return EXIT_DSMI_EXE, "", "Command execute failed!\n"
    try:
        return 0, dispatch(argv, d), ""
    except ToolError as e:
        return e.exit_code, "", f"{e}\n"


def main(argv: list[str]) -> int:
    """Run ``hccn_tool`` with ``argv`` (without the program name); prints and returns the exit status."""
    try:
        d: Path | None = state.node_dir()
    except ValueError as e:
        print(f"hccn_tool (sim): {e}", file=sys.stderr)
        d = None
    code, out, err = run(argv, d)
    sys.stdout.write(out)
    sys.stdout.flush()
    sys.stderr.write(err)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

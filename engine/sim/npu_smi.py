"""Fake ``npu-smi`` for simulated nodes: prints the real 910B output formats.

Formats follow the real samples in shared/reference/ascend (98-column ``npu-smi info``
table, ``\\t%-30s : %s`` key/value types) and, where no capture exists (``-t hccs``), the
tool's source (hicann/driver npucli ``npu_info_print_ext.c``). Readings come from
:mod:`engine.sim.hardware` over the node directory ``$SIM_STATE_DIR/$SIM_NODE``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.sim import hardware, state

# exit statuses: the real tool exits with its negative NPU_ERR_CODE_* value (& 0xff)
EXIT_INVALID_PARAMETER = (-9001) & 0xFF
EXIT_INNER_ERR = (-9005) & 0xFF
EXIT_NOT_SUPPORT = (-9255) & 0xFF
EXIT_DCMI_INIT = (-8005) & 0xFF

SEP = "+===========================+===============+====================================================+"
RULE = "+---------------------------+---------------+----------------------------------------------------+"
TOP = "+" + "-" * 96 + "+"
HEAD1 = "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|"
HEAD2 = "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |"
PROC_HEAD = "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |"

# every -t type npu-smi knows (g_type_info_map_list); the sim answers SUPPORTED_TYPES
KNOWN_TYPES = frozenset(
    "flash usages ecc-enable p2p-enable ecc common license i2c_check ssh-enable err-count pcie-err "
    "mcu-monitor boot-area board health volt temp power memory product mac-addr ip device-share "
    "device-share-cfg-recover nve-level aicpu-config sensors sys-time customized-info info-vnpu "
    "vnpu-mode pkcs-enable vnpu-svm key-manage first-power-on-date tls-csr-get tls-cert "
    "tls-cert-period rootkey proc-mem cpu-num-cfg phyid-remap vnpu-cfg-recover template-info pwm-mode "
    "pwm-duty-ratio p2p-mem-cfg work-mode boot-select topo hccs spod-info sio-info hccs-bw cpu-freq-up "
    "hccs-credit sys-log-info custom-op custom-op-cfg-recover custom-op-secverify-enable "
    "custom-op-secverify-mode op-timeout current-fault-event custom-op-secverify-cert multi-die-policy "
    "multi-die-policy-cfg-recover".split()
)
AICORE_COUNT = {"910B1": 24, "910B2": 24, "910B3": 20, "910B4": 20}
CPU_AFFINITY = (
    "144-167",
    "144-167",
    "96-119",
    "96-119",
    "0-23",
    "0-23",
    "48-71",
    "48-71",
)


class UsageError(Exception):
    """Bad command line; ``exit_code`` is what the real tool returns."""

    def __init__(self, message: str, exit_code: int = EXIT_INVALID_PARAMETER) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Node:
    """Everything one invocation reads from the node directory."""

    cfg: state.NodeConfig
    faults: state.Faults
    engine: dict[str, Any]
    counters: dict[str, Any]
    now: float

    @property
    def chips(self) -> list[hardware.ChipReading]:
        return hardware.chip_readings(self.cfg, self.faults, self.engine, self.now)


def load_node(d: Path, now: float | None = None) -> Node:
    """Read the node's state files (never raises on missing/broken files)."""
    return Node(
        cfg=state.load_config(d),
        faults=state.load_faults(d),
        engine=state.read_engine(d),
        counters=state.load_counters(d),
        now=time.time() if now is None else now,
    )


def kv(key: str, value: object) -> str:
    return f"\t{key:<30} : {value}"


# ---------------------------------------------------------------- help


def top_help() -> str:
    cmds = [
        ("-h", "This command's help information"),
        ("--help", "This command's help information"),
        ("-v", "Show npu-smi version information"),
        ("info", "Show hardware details"),
        ("set", "Modify device configuration properties"),
        ("clear", "Clear device information"),
        ("upgrade", "Upgrade MCU firmware"),
    ]
    lines = ["Usage: npu-smi <Command|-h|-v> [Options...]", "", "npu-smi Command:"]
    lines += [f"\t{name:<12}  {desc}" for name, desc in cmds]
    return "\n".join(lines) + "\n"


def info_help() -> str:
    return (
        "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]\n"
        "\nCommands:\n"
        "       watch          Show all device's status in scrolling format\n"
        "       proc           Show device's matrix process status in scrolling format\n"
        "       -h, --help     Show this help text and exit\n"
        "       -m             Show all device's mapping information\n"
        "       -l             Show all device's topology information\n"
        "       -t type        Show information for type\n"
        "                      type: board, flash, memory, usages, sensors, temp, power, volt, mac-addr,\n"
        "                            common, health, product, ecc, ip, sys-time, i2c_check, work-mode,\n"
        "                            boot-select, topo, hccs, sio-info, spod-info, tls-csr-get, tls-cert,\n"
        "                            tls-cert-period, rootkey, hccs-bw, cpu-freq-up, sys-log-info, hccs-credit.\n"
        "\nOptions:\n"
        "       -i %d          Card ID\n"
        "       -c %d          Chip ID\n"
        "       -p %d          Chip Physical ID\n"
    )


def hccs_help() -> str:
    return (
        "Usage: npu-smi info -t hccs [Options...]\n"
        "\nOptions:\n"
        "       -i %d          Card ID\n"
        "       -c %d          Chip ID\n"
        "       -lane %d       Lane ID\n"
    )


# ---------------------------------------------------------------- the table


def _mem(used: int, total: int, width: int) -> str:
    return f"{used:<5}/ {total:<{width}}"  # a 5-digit used value runs into the slash, as on real output


def render_table(node: Node) -> str:
    """``npu-smi info``: the 98-column 910B table followed by the process table."""
    ver = node.cfg.versions["driver"]
    out = [TOP, f"| npu-smi {ver:<25}Version: {ver:<53}|", RULE, HEAD1, HEAD2, SEP]
    chips = node.chips
    for c in chips:
        out.append(
            f"| {c.npu_id:<6}{c.name:<20}| {c.health:<14}| {c.power_w:<12.1f}{c.temp_c:<18}{_mem(0, 0, 14)}|"
        )
        out.append(
            f"| {c.chip_id:<26}| {c.bus_id:<14}| {c.aicore_pct:<12}{_mem(0, 0, 11)}"
            f"{_mem(c.hbm_used_mb, c.hbm_total_mb, 14)}|"
        )
        out.append(SEP)
    out += [RULE, PROC_HEAD, SEP]
    for c in chips:
        if c.process_pid is None:
            out.append(f"| {'No running processes found in NPU ' + str(c.npu_id):<95}|")
        else:
            # containerised vLLM workers show an empty process name
            out.append(
                f"| {c.npu_id:<8}{c.chip_id:<18}| {c.process_pid:<14}| {'':<25}| {c.process_mem_mb:<24}|"
            )
        out.append(SEP)
    return "\n".join(out) + "\n"


def render_list(node: Node) -> str:
    """``npu-smi info -l``."""
    out = [kv("Total Count", node.cfg.npu_count)]
    for npu in range(node.cfg.npu_count):
        out += ["", kv("NPU ID", npu), kv("Chip Count", 1)]
    return "\n".join(out) + "\n"


def render_mapping(node: Node) -> str:
    """``npu-smi info -m`` (MCU rows keep their trailing spaces, like the real tool)."""
    out = [f"\t{'NPU ID':<30} {'Chip ID':<30} {'Chip Logic ID':<30} {'Chip Name':<30}"]
    for npu in range(node.cfg.npu_count):
        out.append(f"\t{npu:<30} {0:<30} {npu:<30} Ascend {node.cfg.npu_name}")
        out.append(f"\t{npu:<30} {1:<30} {'-':<30} {'Mcu':<30}")
    return "\n".join(out) + "\n"


def render_topo(node: Node) -> str:
    """``npu-smi info -t topo``: every 910B pair is HCCS on an 8-NPU A2 board."""
    n = node.cfg.npu_count
    out = ["\t   " + "".join(f"NPU{i:<8}" for i in range(n)) + "CPU Affinity"]
    for row in range(n):
        cells = "".join(f"{'X' if row == col else 'HCCS':<11}" for col in range(n))
        out.append(f"NPU{row:<8}{cells}{CPU_AFFINITY[row % len(CPU_AFFINITY)]}")
    out += [
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  SYS  = Path traversing PCIe and NUMA nodes. Nodes are connected through SMP, such as QPI, UPI.",
        "  PHB  = Path traversing PCIe and the PCIe host bridge of a CPU.",
        "  PIX  = Path traversing a single PCIe switch.",
        "  PXB  = Path traversing multiple PCIe switches.",
        "  HCCS = Connection traversing HCCS.",
        "  NA   = Unknown relationship.",
    ]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- -t types


def _card_head(npu: int) -> list[str]:
    return [kv("NPU ID", npu), kv("Chip Count", 1), ""]


def _pct(used: int, total: int) -> int:
    return int(round(100.0 * used / total)) if total else 0


def t_usages(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    body = [
        kv("DDR Capacity(MB)", 0),
        kv("DDR Usage Rate(%)", 0),
        kv("DDR Hugepages Total(page)", 0),
        kv("DDR Hugepages Usage Rate(%)", 0),
        kv("HBM Capacity(MB)", c.hbm_total_mb),
        kv("HBM Usage Rate(%)", _pct(c.hbm_used_mb, c.hbm_total_mb)),
        kv("Aicore Usage Rate(%)", c.aicore_pct),
        kv("Aivector Usage Rate(%)", c.aicore_pct // 2),
        kv("Aicpu Usage Rate(%)", 0),
        kv("Ctrlcpu Usage Rate(%)", 6),
        kv("DDR Bandwidth Usage Rate(%)", 0),
        kv("HBM Bandwidth Usage Rate(%)", c.aicore_pct // 3),
        kv("NPU Utilization(%)", c.aicore_pct),
        kv("Aicube Usage Rate(%)", c.aicore_pct),
    ]
    return (body if chip is not None else _card_head(npu) + body) + [kv("Chip ID", 0)]


def t_temp(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    if chip is not None:
        return [kv("NPU Temperature (C)", c.temp_c), kv("Chip ID", 0)]
    mcu = 36 + c.temp_c // 20
    return _card_head(npu) + [
        kv("NPU Temperature (C)", c.temp_c),
        kv("Chip ID", 0),
        "",
        kv("LM75A_TE (C)", mcu),
        kv("LM75B_TE (C)", mcu),
        kv("Chip Name", "MCU"),
    ]


def t_power(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    line = kv("NPU Real-time Power(W)", f"{c.power_w:.1f}")
    return ([line] if chip is not None else _card_head(npu) + [line]) + [
        kv("Chip ID", 0)
    ]


def t_memory(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    body = [
        kv("DDR Capacity(MB)", 0),
        kv("DDR Clock Speed(MHz)", 0),
        kv("HBM Capacity(MB)", c.hbm_total_mb),
        kv("HBM Clock Speed(MHz)", 1600),
        kv("HBM Temperature(C)", c.hbm_temp_c),
        kv("HBM Manufacturer ID", "0x57"),
    ]
    return body if chip is not None else _card_head(npu) + body + [kv("Chip ID", 0)]


def t_board(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    v = node.cfg.versions
    if chip is not None:
        return [
            kv("NPU ID", npu),
            kv("Chip ID", 0),
            kv("Chip Type", "Ascend"),
            kv("Chip Name", node.cfg.npu_name),
            kv("Chip Version", "V1"),
            kv("Board ID", "0x60"),
            kv("PCB ID", "NA"),
            kv("BOM ID", 1),
            kv("Chip Position ID", 0),
            kv("PCIe Bus Info", c.bus_id),
            kv("Firmware Version", v["firmware"]),
        ]
    return [
        kv("NPU ID", npu),
        kv("Product Name", "IT21HMDC_Bin5"),
        kv("Model", "NA"),
        kv("Manufacturer", "Huawei"),
        kv("Serial Number", f"1025C90{npu:05d}"),
        kv("Software Version", v["driver"]),
        kv("Firmware Version", v["firmware"]),
        kv("Compatibility", "OK"),
        kv("Board ID", "0x60"),
        kv("PCB ID", "A"),
        kv("BOM ID", 1),
        kv("PCIe Bus Info", c.bus_id),
        kv("Slot ID", npu),
        kv("Class ID", "NA"),
        kv("PCI Vendor ID", "0x19E5"),
        kv("PCI Device ID", "0xD802"),
        kv("Subsystem Vendor ID", "0x19E5"),
        kv("Subsystem Device ID", "0x3003"),
        kv("Chip Count", 1),
    ]


def t_health(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    if c.error_codes:
        # "\t%-30s :" then " %04X" per code (print_error_codes)
        codes = f"\t{'Error Code':<30} :" + "".join(
            f" {code}" for code in c.error_codes
        )
        info = f"\t{'Error Information':<30} : {hardware.WARNING_INFO}"
    else:
        codes, info = kv("Error Code", "NA"), kv("Error Information", "NA")
    # card level prints "Health", chip level "Health Status" (npu_chip_info.c / npu_info_print_ext.c)
    return [
        kv("Health Status" if chip is not None else "Health", c.health),
        codes,
        info,
    ]


def t_common(node: Node, npu: int, chip: int | None) -> list[str]:
    c = node.chips[npu]
    body = [
        kv("Memory Usage Rate(%)", 0),
        kv("HBM Usage Rate(%)", _pct(c.hbm_used_mb, c.hbm_total_mb)),
        kv("Aicore Usage Rate(%)", c.aicore_pct),
        kv("Aicore Freq(MHZ)", 1800),
        kv("Aicore curFreq(MHZ)", 1800 if c.aicore_pct else 800),
        kv("Aicore Count", AICORE_COUNT.get(node.cfg.npu_name, 20)),
        kv("Temperature(C)", c.temp_c),
        kv("NPU Real-time Power(W)", f"{c.power_w:.1f}"),
    ]
    if chip is not None:
        return [kv("Chip ID", 0)] + body
    return (
        [kv("NPU ID", npu), kv("Chip Count", 1), "", kv("Chip ID", 0)]
        + body
        + [
            "",
            kv("Chip Name", "mcu"),
            kv("Temperature(C)", 36 + c.temp_c // 20),
        ]
    )


def _arr(values: list[int]) -> str:
    return "[" + "".join(f"{v:<20} " for v in values) + "]"


def t_hccs(
    node: Node, npu: int, chip: int | None, lane: int | None = None
) -> list[str]:
    """``-t hccs -i N -c C`` (print_npu_hccs_lane: keys carry a trailing space, 7 links)."""
    links = hardware.hccs_links(node.counters, npu)
    n = hardware.HCCS_LINKS
    if lane is not None:

        def one(
            key: str, v: int
        ) -> str:  # print_npu_single_hccs_lane: one "[%-20llu]" value
            return f"\t{key:<30} : [{v:<20}]"

        return [
            kv("hccs health status ", "OK"),
            one("hccs lane mode ", 4),
            f"\t{'hccs link lane list ':<30} : [1111{'':16}]",
            one("hccs link speed ", 4 * 56),
            one("hccs tx packets ", links.tx[lane]),
            one("hccs tx bytes ", links.tx[lane] * hardware.HCCS_PACKET_BYTES),
            one("hccs rx packets ", links.rx[lane]),
            one("hccs rx bytes ", links.rx[lane] * hardware.HCCS_PACKET_BYTES),
            one("hccs retry count ", links.retry[lane]),
            one("hccs error count ", links.crc[lane]),
            kv("hccs first error lane ", "NA"),
        ]
    return [
        kv("hccs health status ", "OK"),
        f"\t{'hccs lane mode ':<30} : " + _arr([4] * n),
        f"\t{'hccs link lane list ':<30} : ["
        + "".join(f"1111{'':16} " for _ in range(n))
        + "]",
        f"\t{'hccs link speed ':<30} : " + _arr([4 * 56] * n),
        f"\t{'hccs tx packets ':<30} : " + _arr(links.tx),
        f"\t{'hccs tx bytes ':<30} : "
        + _arr([x * hardware.HCCS_PACKET_BYTES for x in links.tx]),
        f"\t{'hccs rx packets ':<30} : " + _arr(links.rx),
        f"\t{'hccs rx bytes ':<30} : "
        + _arr([x * hardware.HCCS_PACKET_BYTES for x in links.rx]),
        f"\t{'hccs retry count ':<30} : " + _arr(links.retry),
        f"\t{'hccs error count ':<30} : " + _arr(links.crc),
        kv("hccs first error lane ", "NA"),
    ]


def t_hccs_bw(node: Node, npu: int, chip: int) -> list[str]:
    """``-t hccs-bw -i N -c C`` (printf_hccs_bandwidth_info: PCS 1..7, then total).

    GB/s over the last counter interval: the engine's HCCS load on each link.
    """
    links = hardware.hccs_links(node.counters, npu)
    load = (
        float(node.engine.get("load", 0.0))
        if node.engine.get("phase") == "ready"
        else 0.0
    )
    on_hccs = hardware.hccs_carries_traffic(
        node.cfg, str(node.engine.get("link_mode", "hccs"))
    )
    per_link = (
        hardware.HCCS_LINK_PPS * hardware.HCCS_PACKET_BYTES * load / 1e9
        if on_hccs
        else 0.0
    )
    out = [f"{'hccs link':<30} {'tx_bandwidth(GB/S)':<30} {'rx_bandwidth(GB/S)':<30}"]
    for i in range(len(links.tx)):
        out.append(f"{i + 1:<35d} {per_link:<30.6f} {per_link:<30.6f}")
    total = per_link * len(links.tx)
    out.append(f"{'total':<35} {total:<30.6f} {total:<30.6f}")
    return out


TypeFn = Callable[[Node, int, "int | None"], list[str]]
SUPPORTED_TYPES: dict[str, TypeFn] = {
    "usages": t_usages,
    "temp": t_temp,
    "power": t_power,
    "memory": t_memory,
    "board": t_board,
    "health": t_health,
    "common": t_common,
}


# ---------------------------------------------------------------- argv handling


def _int_arg(opt: str, value: str | None) -> int:
    if value is None or not value.isdigit():
        raise UsageError(f"Error parameter of {opt}")
    return int(value)


def info_main(argv: list[str], d: Path) -> str:
    """``npu-smi info ...``; returns stdout text or raises UsageError."""
    if not argv:
        return render_table(load_node(d))
    first = argv[0]
    if first in ("-h", "--help"):
        return info_help()
    if first == "proc":
        raise UsageError(
            "This device does not support querying proc info.", EXIT_NOT_SUPPORT
        )
    if first == "-l" and len(argv) == 1:
        return render_list(load_node(d))
    if first == "-m" and len(argv) == 1:
        return render_mapping(load_node(d))
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        opt = argv[i]
        if opt not in ("-t", "-i", "-c", "-lane", "-time") or opt in opts:
            raise UsageError(f"Error parameter of {opt}")
        if i + 1 >= len(argv):
            raise UsageError(f"Error parameter of {opt}")
        opts[opt] = argv[i + 1]
        i += 2
    if "-t" not in opts:
        raise UsageError("\nInput parameter format error.")
    typ = opts["-t"]
    if typ not in KNOWN_TYPES:
        raise UsageError("Error parameter of -t")
    node = load_node(d)
    if typ in ("hccs", "hccs-bw") and node.faults.hccs_unsupported:
        # a driver without these types answers as for any unknown -t type
        # (npu_cmd_parse.c; 23.0.rc2's help ends at topo)
        raise UsageError("Error parameter of -t")
    if typ == "topo":
        if "-i" in opts or "-c" in opts:
            raise UsageError(
                "Error parameter of -i" if "-i" in opts else "Error parameter of -c"
            )
        return render_topo(node)
    if typ not in ("hccs", "hccs-bw") and typ not in SUPPORTED_TYPES:
        raise UsageError(
            f"This device does not support querying {typ}.", EXIT_NOT_SUPPORT
        )
    if "-i" not in opts:
        raise UsageError("\nThis command must input card id.\n")
    npu = _int_arg("-i", opts["-i"])
    if npu >= node.cfg.npu_count:
        raise UsageError("Error parameter of -i")
    chip = _int_arg("-c", opts["-c"]) if "-c" in opts else None
    if chip is not None and chip != 0:  # chip 1 is the MCU; compute types need chip 0
        raise UsageError(
            f"This device does not support querying {typ}.", EXIT_NOT_SUPPORT
        )
    if typ == "hccs":
        if chip is None:  # per-chip type: -i and -c are both required
            raise UsageError(hccs_help().rstrip("\n"))
        lane = _int_arg("-lane", opts["-lane"]) if "-lane" in opts else None
        if lane is not None and lane >= hardware.HCCS_LINKS:
            raise UsageError("Error parameter of -lane")
        return "\n".join(t_hccs(node, npu, chip, lane)) + "\n"
    if "-lane" in opts:
        raise UsageError("Error parameter of -lane")
    if "-time" in opts and typ != "hccs-bw":
        raise UsageError("Error parameter of -time")
    if typ == "hccs-bw":
        _int_arg("-time", opts.get("-time", "1000"))  # sampling window in ms
        if chip is None:  # per-chip type like hccs
            raise UsageError("Error parameter of -c")
        return "\n".join(t_hccs_bw(node, npu, chip)) + "\n"
    return "\n".join(SUPPORTED_TYPES[typ](node, npu, chip)) + "\n"


def run(argv: list[str], d: Path | None) -> tuple[int, str]:
    """Pure entry point: (exit status, stdout) for ``npu-smi <argv>`` on node dir ``d``."""
    if not argv:
        return EXIT_INVALID_PARAMETER, top_help()
    cmd = argv[0]
    if cmd in ("-h", "--help"):
        return 0, top_help()
    if cmd not in ("-v", "info", "set", "clear", "upgrade"):
        return EXIT_INNER_ERR, "Command or option is not found.\n" + top_help()
    if d is None:
        return EXIT_DCMI_INIT, "dcmi module initialize failed. ret is -8005\n"
    if cmd == "-v":
        return 0, f"npu-smi version: {state.load_config(d).versions['driver']}\n"
    if cmd != "info":
        return (
            EXIT_NOT_SUPPORT,
            f"This device does not support {cmd} in the simulator.\n",
        )
    try:
        return 0, info_main(argv[1:], d)
    except UsageError as e:
        return e.exit_code, f"{e}\n"


def main(argv: list[str]) -> int:
    """Run ``npu-smi`` with ``argv`` (without the program name); prints and returns the exit status."""
    try:
        d: Path | None = state.node_dir()
    except ValueError as e:
        print(f"npu-smi (sim): {e}", file=sys.stderr)
        d = None
    code, out = run(argv, d)
    sys.stdout.write(out)
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

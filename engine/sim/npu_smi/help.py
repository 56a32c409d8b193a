"""The fake ``npu-smi``'s help texts: the top-level usage, ``info``'s and ``info -t hccs``'s.

Kept apart from the renderers: they are fixed text, printed for ``-h`` and as the
message of some usage errors.
"""

from __future__ import annotations


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

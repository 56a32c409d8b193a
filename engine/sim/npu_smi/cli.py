"""The fake ``npu-smi``'s command line: ``run`` (the pure entry point), ``main`` and ``info``'s argv.

``info_main`` reads as its steps: the bare views (no options), the ``-t`` option
parse, the checks the real tool makes in its order, then a lookup of the type's
renderer. The renderers themselves live in :mod:`~engine.sim.npu_smi.table`,
:mod:`~engine.sim.npu_smi.card` and :mod:`~engine.sim.npu_smi.hccs`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from engine.sim import hardware, state
from engine.sim.npu_smi.card import SUPPORTED_TYPES
from engine.sim.npu_smi.hccs import t_hccs, t_hccs_bw
from engine.sim.npu_smi.help import hccs_help, info_help, top_help
from engine.sim.npu_smi.node import (
    EXIT_DCMI_INIT,
    EXIT_INNER_ERR,
    EXIT_INVALID_PARAMETER,
    EXIT_NOT_SUPPORT,
    Node,
    UsageError,
    load_node,
)
from engine.sim.npu_smi.table import (
    render_list,
    render_mapping,
    render_table,
    render_topo,
)

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
# ``info`` forms that take no options (-l and -m only when alone): argv -> whole-device view
BARE_VIEWS: dict[tuple[str, ...], Callable[[Path], str]] = {
    (): lambda d: render_table(load_node(d)),
    ("-l",): lambda d: render_list(load_node(d)),
    ("-m",): lambda d: render_mapping(load_node(d)),
}
INFO_OPTIONS = ("-t", "-i", "-c", "-lane", "-time")


def _int_arg(opt: str, value: str | None) -> int:
    if value is None or not value.isdigit():
        raise UsageError(f"Error parameter of {opt}")
    return int(value)


def info_main(argv: list[str], d: Path) -> str:
    """``npu-smi info ...``; returns stdout text or raises UsageError."""
    view = _bare_view(argv)
    if view is not None:
        return view(d)
    opts = _parse_options(argv)
    typ = _requested_type(opts)
    node = load_node(d)
    _check_supported(node, typ)
    if typ == "topo":
        return _info_topo(node, opts)
    npu, chip = _card_and_chip(node, typ, opts)
    render = TYPE_VIEWS.get(typ, _info_card_type)
    return "\n".join(render(node, typ, opts, npu, chip)) + "\n"


def _bare_view(argv: list[str]) -> Callable[[Path], str] | None:
    """The view for ``info`` without ``-t`` options, or None when ``argv`` holds options."""
    if tuple(argv) in BARE_VIEWS:
        return BARE_VIEWS[tuple(argv)]
    first = argv[0]
    if first in ("-h", "--help"):
        return lambda d: info_help()
    if first == "proc":
        raise UsageError(
            "This device does not support querying proc info.", EXIT_NOT_SUPPORT
        )
    return None


def _parse_options(argv: list[str]) -> dict[str, str]:
    """``-opt value`` pairs; an unknown, repeated or value-less option is a UsageError."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        opt = argv[i]
        if opt not in INFO_OPTIONS or opt in opts:
            raise UsageError(f"Error parameter of {opt}")
        if i + 1 >= len(argv):
            raise UsageError(f"Error parameter of {opt}")
        opts[opt] = argv[i + 1]
        i += 2
    return opts


def _requested_type(opts: dict[str, str]) -> str:
    """The ``-t`` type, which must be one npu-smi knows."""
    if "-t" not in opts:
        raise UsageError("\nInput parameter format error.")
    typ = opts["-t"]
    if typ not in KNOWN_TYPES:
        raise UsageError("Error parameter of -t")
    return typ


def _check_supported(node: Node, typ: str) -> None:
    """Refuse a known type this node (or the simulator) does not answer."""
    if typ in ("hccs", "hccs-bw") and node.faults.hccs_unsupported:
        # a driver without these types answers as for any unknown -t type
        # (npu_cmd_parse.c; 23.0.rc2's help ends at topo)
        raise UsageError("Error parameter of -t")
    if typ not in ("topo", "hccs", "hccs-bw") and typ not in SUPPORTED_TYPES:
        raise UsageError(
            f"This device does not support querying {typ}.", EXIT_NOT_SUPPORT
        )


def _info_topo(node: Node, opts: dict[str, str]) -> str:
    """``-t topo``: the whole board, so neither -i nor -c is allowed."""
    if "-i" in opts or "-c" in opts:
        raise UsageError(
            "Error parameter of -i" if "-i" in opts else "Error parameter of -c"
        )
    return render_topo(node)


def _card_and_chip(
    node: Node, typ: str, opts: dict[str, str]
) -> tuple[int, int | None]:
    """The ``-i`` card (required, on this node) and the ``-c`` chip (absent or 0)."""
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
    return npu, chip


def _info_hccs(
    node: Node, typ: str, opts: dict[str, str], npu: int, chip: int | None
) -> list[str]:
    """``-t hccs``: per chip, all links or the ``-lane`` one."""
    if chip is None:  # per-chip type: -i and -c are both required
        raise UsageError(hccs_help().rstrip("\n"))
    lane = _int_arg("-lane", opts["-lane"]) if "-lane" in opts else None
    if lane is not None and lane >= hardware.HCCS_LINKS:
        raise UsageError("Error parameter of -lane")
    return t_hccs(node, npu, chip, lane)


def _no_lane_or_time(opts: dict[str, str], typ: str) -> None:
    """Only ``-t hccs`` takes ``-lane``; only ``-t hccs-bw`` takes ``-time``."""
    if "-lane" in opts:
        raise UsageError("Error parameter of -lane")
    if "-time" in opts and typ != "hccs-bw":
        raise UsageError("Error parameter of -time")


def _info_hccs_bw(
    node: Node, typ: str, opts: dict[str, str], npu: int, chip: int | None
) -> list[str]:
    """``-t hccs-bw``: per chip, over a ``-time`` window."""
    _no_lane_or_time(opts, typ)
    _int_arg("-time", opts.get("-time", "1000"))  # sampling window in ms
    if chip is None:  # per-chip type like hccs
        raise UsageError("Error parameter of -c")
    return t_hccs_bw(node, npu, chip)


def _info_card_type(
    node: Node, typ: str, opts: dict[str, str], npu: int, chip: int | None
) -> list[str]:
    """One of :data:`SUPPORTED_TYPES`, card or chip level."""
    _no_lane_or_time(opts, typ)
    return SUPPORTED_TYPES[typ](node, npu, chip)


TypeView = Callable[[Node, str, dict[str, str], int, "int | None"], list[str]]
# the types with options of their own; every other type is _info_card_type
TYPE_VIEWS: dict[str, TypeView] = {"hccs": _info_hccs, "hccs-bw": _info_hccs_bw}


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

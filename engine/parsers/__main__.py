"""``python -m engine.parsers KIND FILE`` — parse captured tool output, print JSON.

Exit status: 0 parsed, 2 unparsable output (ParseError) or bad arguments,
3 the output says the command is unsupported on this driver (Unsupported).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from engine.parsers import ParseError, Unsupported, hccn_tool, npu_smi


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _info(text: str) -> Any:
    info = npu_smi.parse_info(text)
    return {
        "chips": [c.to_dict() for c in info.chips],
        "processes": [p.to_dict() for p in info.processes],
    }


KINDS: dict[str, tuple[Callable[[str], Any], str]] = {
    "npu-smi-info": (_info, "npu-smi info (table)"),
    "npu-smi-kv": (npu_smi.parse_kv, "npu-smi info -t <type>: raw key : value blocks"),
    "npu-smi-usages": (npu_smi.parse_usages, "npu-smi info -t usages -i N"),
    "npu-smi-temp": (npu_smi.parse_temp, "npu-smi info -t temp -i N"),
    "npu-smi-power": (npu_smi.parse_power, "npu-smi info -t power -i N"),
    "npu-smi-memory": (npu_smi.parse_memory, "npu-smi info -t memory -i N -c C"),
    "npu-smi-board": (npu_smi.parse_board, "npu-smi info -t board -i N [-c C]"),
    "npu-smi-health": (npu_smi.parse_health, "npu-smi info -t health -i N [-c C]"),
    "npu-smi-hccs": (npu_smi.parse_hccs, "npu-smi info -t hccs -i N -c C"),
    "npu-smi-list": (npu_smi.parse_list, "npu-smi info -l"),
    "npu-smi-mapping": (npu_smi.parse_mapping, "npu-smi info -m"),
    "hccn-link": (hccn_tool.parse_link, "hccn_tool -i N -link -g"),
    "hccn-net-health": (hccn_tool.parse_net_health, "hccn_tool -i N -net_health -g"),
    "hccn-stat": (hccn_tool.parse_stat, "hccn_tool -i N -stat -g"),
    "hccn-link-stat": (hccn_tool.parse_link_stat, "hccn_tool -i N -link_stat -g"),
    "hccn-ip": (hccn_tool.parse_ip, "hccn_tool -i N -ip -g"),
    "hccn-lldp": (hccn_tool.parse_lldp, "hccn_tool -i N -lldp -g"),
    "hccn-optical": (hccn_tool.parse_optical, "hccn_tool -i N -optical -g"),
    "hccn-netdetect": (hccn_tool.parse_netdetect, "hccn_tool -i N -netdetect -g"),
    "hccn-gateway": (hccn_tool.parse_gateway, "hccn_tool -i N -gateway -g"),
    "hccn-ping": (hccn_tool.parse_ping, "hccn_tool -i N -ping -g address <ip>"),
}


_EXIT_HELP = "0 ok, 2 unparsable output, 3 unsupported by the driver"


def _parser() -> argparse.ArgumentParser:
    kinds = "\n".join(f"  {name:<16} {help_}" for name, (_, help_) in KINDS.items())
    p = argparse.ArgumentParser(
        prog="python -m engine.parsers",
        description="Parse captured npu-smi / hccn_tool output and print it as JSON.",
        epilog=f"kinds:\n{kinds}\n\nexit status: {_EXIT_HELP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "kind",
        choices=sorted(KINDS),
        metavar="KIND",
        help="what produced the text (see below)",
    )
    p.add_argument(
        "file", metavar="FILE", help="file with the tool's stdout, or - for stdin"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.file == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(args.file, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            print(f"error: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
            return 2
    parse, _ = KINDS[args.kind]
    try:
        result = parse(text)
    except ParseError as exc:
        print(f"error: {args.kind}: {exc}", file=sys.stderr)
        return 2
    except Unsupported as exc:
        print(f"unsupported: {args.kind}: {exc}", file=sys.stderr)
        return 3
    json.dump(_jsonable(result), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

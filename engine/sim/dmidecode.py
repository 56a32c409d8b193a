"""Fake ``dmidecode`` for simulated nodes: only ``-s KEYWORD`` (one SMBIOS string).

``dmidecode -s system-product-name`` prints the SMBIOS System Information Product
Name alone on one line (dmidecode(8)). The sim prints the label of the node's
``server_model`` (engine/capabilities/servers.py); an unknown model prints the placeholder
many vendors leave in SMBIOS. An unknown keyword is refused like the real tool:
``Invalid string keyword: X`` and the list of valid ones on stderr, exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from engine.capabilities import UNKNOWN_MODEL, capability
from engine.sim import state

EXIT_USAGE = 2
KEYWORDS = (
    "bios-vendor",
    "bios-version",
    "system-manufacturer",
    "system-product-name",
    "system-serial-number",
)


def run(argv: list[str], d: Path | None) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``dmidecode <argv>`` on node dir ``d``."""
    if len(argv) != 2 or argv[0] not in ("-s", "--string"):
        return EXIT_USAGE, "", "dmidecode (sim) answers only '-s KEYWORD'\n"
    keyword = argv[1]
    if keyword not in KEYWORDS:
        valid = "".join(f"  {k}\n" for k in KEYWORDS)
        return (
            EXIT_USAGE,
            "",
            f"Invalid string keyword: {keyword}\nValid string keywords are:\n{valid}",
        )
    if d is None:
        return 1, "", "/dev/mem: No such file or directory\n"
    cfg = state.load_config(d)
    values = {
        "bios-vendor": "Huawei Corp.",
        "bios-version": "1.00",
        "system-manufacturer": "Huawei",
        "system-product-name": "To be filled by O.E.M."
        if capability(cfg.server_model).key == UNKNOWN_MODEL
        else capability(cfg.server_model).label,
        "system-serial-number": f"SIM{cfg.name.upper()}",
    }
    return 0, values[keyword] + "\n", ""


def main(argv: list[str]) -> int:
    try:
        d: Path | None = state.node_dir()
    except ValueError as e:
        print(f"dmidecode (sim): {e}", file=sys.stderr)
        d = None
    code, out, err = run(argv, d)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

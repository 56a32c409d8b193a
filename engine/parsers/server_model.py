"""Which Ascend server is this? From ``dmidecode -s system-product-name`` and npu-smi.

``dmidecode -s system-product-name`` prints the SMBIOS System Information "Product
Name" string alone on one line (dmidecode(8): "-s KEYWORD: only display the value of
the DMI string identified by KEYWORD"); ``/sys/class/dmi/id/product_name`` holds the
same string and is readable without root. Vendors leave placeholders such as "To be
filled by O.E.M." or "Not Specified" where they did not fill it in. No public capture
of this string on an Atlas server was found, so names are matched on their model
tokens (``800T A2``, ``200T A2 Box16`` ...) rather than one exact spelling.

npu-smi does not name the server: ``npu-smi info -t board -i N`` prints the card's
part code as "Product Name" (``IT21HMDC_Bin5`` in the 910B 25.5.1 sample), but it
gives the chip family, which must agree with the server model: the chip name of
``-t board -i N -c 0`` / the ``npu-smi info`` Name column (``910B3`` → 910B, Atlas
A2; ``Ascend910`` on A3) and the PCI Device ID (``0xD802`` on 910B, sample
``npu-smi-info-t-board-i0-910b-25.5.1.txt``; ``0xD801`` on the 910 training chip,
MindCluster collection example).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from engine.capabilities import CAPABILITIES, UNKNOWN_MODEL
from engine.checktext import item, text

_PLACEHOLDERS = frozenset(
    {
        "",
        "to be filled by o.e.m.",
        "not specified",
        "not applicable",
        "default string",
        "system product name",
        "none",
        "unknown",
        "0123456789",
    }
)

# Model tokens in the product name, most specific first. Box16 before "A2".
_NAME_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "atlas-200t-a2-box16",
        re.compile(r"\b200T\s*A2\b.*\bBox\s*16\b|\bBox\s*16\b", re.I),
    ),
    ("atlas-800t-a2", re.compile(r"\b800T\s*A2\b", re.I)),
    ("atlas-800i-a2", re.compile(r"\b800I\s*A2\b", re.I)),
    ("atlas-800t-a3", re.compile(r"\b800T\s*A3\b", re.I)),
    ("atlas-800i-a3", re.compile(r"\b800I\s*A3\b", re.I)),
    ("atlas-300t-pro", re.compile(r"\b300T\s*Pro\b", re.I)),
)

# Chip family per npu-smi chip name (Name column / board "Chip Name").
_CHIP_FAMILY = (
    (re.compile(r"^910B\d?$", re.I), "910B"),
    (re.compile(r"^(Ascend)?910_?93$|^Ascend910$", re.I), "910_93"),
    (re.compile(r"^910(A|ProA|ProB|PremiumA)?$", re.I), "910"),
    (re.compile(r"^310P\d?$", re.I), "310P"),
)
_DEVICE_ID_FAMILY = {"0xd802": "910B", "0xd801": "910"}


def parse_dmi_product_name(text: str) -> str | None:
    """The product name ``dmidecode -s system-product-name`` printed (or the sysfs
    file held); None for an empty answer or a vendor placeholder."""
    lines = [line.strip() for line in text.replace("\r\n", "\n").split("\n")]
    lines = [line for line in lines if line and not line.startswith("#")]
    if not lines:
        return None
    name = lines[-1]  # dmidecode prints comments ("# SMBIOS ...") before the value
    return None if name.lower() in _PLACEHOLDERS else name


def model_from_product_name(name: str | None) -> str | None:
    """The capability key (engine/capabilities/servers.py) named by a product name, or None."""
    if not name:
        return None
    for key, pattern in _NAME_PATTERNS:
        if pattern.search(name):
            return key
    return None


def chip_family(
    chip_name: str | None = None, device_id: str | None = None
) -> str | None:
    """910B / 910_93 / 910 / 310P from an npu-smi chip name or PCI device id."""
    if chip_name:
        name = chip_name.strip().removeprefix("Ascend ").strip()
        for pattern, family in _CHIP_FAMILY:
            if pattern.match(name) or pattern.match(chip_name.strip()):
                return family
    if device_id:
        return _DEVICE_ID_FAMILY.get(device_id.strip().lower())
    return None


@dataclass(frozen=True)
class ServerModelDetection:
    """What preflight found. ``model`` is a capability key; ``unknown`` when unsure.
    ``evidence`` is English; ``evidence_item`` the same as an item of engine/checktext.py
    (the console shows it in the reader's language)."""

    model: str
    product_name: str | None
    chip_family: str | None
    evidence: str
    evidence_item: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def detect_server_model(
    product_name: str | None, chip_name: str | None, device_id: str | None = None
) -> ServerModelDetection:
    """Combine the SMBIOS product name with npu-smi's chip family.

    The product name decides the model; the chip family must agree with that model's
    chip (else ``unknown``, with both in the evidence). Without a recognisable product
    name the model is ``unknown``: several servers share one chip family, and what
    HCCL does with the RoCE switch differs between them.
    """
    family = chip_family(chip_name, device_id)
    key = model_from_product_name(product_name)
    shown: Any = repr(product_name) if product_name else item("item.no_product_name")
    chip = item(
        "item.chip",
        chip=chip_name or device_id or "?",
        family=family or item("item.family_unknown"),
    )
    if key is None:
        why = item("item.smbios_unknown", product=shown, chip=chip)
        return ServerModelDetection(UNKNOWN_MODEL, product_name, family, text(why), why)
    cap = CAPABILITIES[key]
    if family is not None and family != cap.chip:
        why = item(
            "item.smbios_disagrees",
            product=shown,
            label=cap.label,
            model_chip=cap.chip,
            chip=chip,
        )
        return ServerModelDetection(UNKNOWN_MODEL, product_name, family, text(why), why)
    why = item("item.smbios_found", product=shown, chip=chip)
    return ServerModelDetection(key, product_name, family, text(why), why)

"""The static description of a simulated node (``node.json``): :class:`NodeConfig`.

Its defaults (versions, server model) and its load/save. Kept apart from faults and the
engine's files because only the agent and tests write it; the simulators only read it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.capabilities import HONOURED, capability
from engine.sim.state.store import NODE_FILE, _coerce, read_json, write_json

DEFAULT_VERSIONS: dict[str, str] = {
    "driver": "25.2.0",
    "firmware": "7.7.0.1.231",
    "cann": "9.1.0",
    "vllm": "0.23.0",
    "vllm_ascend": "0.23.0",
    "torch_npu": "2.10.0.post4",
}


# The demo's servers (engine/capabilities/servers.py key). Whether the hardware honours
# HCCL_INTRA_ROCE_ENABLE follows that model's capability entry.
DEFAULT_SERVER_MODEL = "atlas-800t-a2"


@dataclass
class NodeConfig:
    """Static description of a simulated node (``node.json``)."""

    name: str
    npu_count: int = 8
    npu_name: str = "910B3"
    hbm_total_mb: int = 65536
    npu_ips: list[str] = field(
        default_factory=list
    )  # sim only: loopback range, e.g. 127.10.1.1..8
    versions: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_VERSIONS))
    server_model: str = DEFAULT_SERVER_MODEL  # capability key, e.g. atlas-200t-a2-box16
    # None = as the server model's capability entry says; a bool forces it (tests)
    honours_roce_switch: bool | None = None

    def honours_switch(self) -> bool:
        """Does this node's HCCL move intra-server traffic to RoCE when asked?"""
        if self.honours_roce_switch is not None:
            return self.honours_roce_switch

        return capability(self.server_model).roce_switch == HONOURED

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_config(d: Path) -> NodeConfig:
    """Read ``node.json``; missing/invalid fields take defaults (name defaults to the dir name)."""
    raw = read_json(d / NODE_FILE)
    cfg = NodeConfig(name=d.name)
    fields = _coerce(raw, cfg.to_dict(), set())
    cfg = dataclasses.replace(cfg, **fields)
    # an optional bool: _coerce keeps only str/None for a None default
    honours = raw.get("honours_roce_switch")
    cfg.honours_roce_switch = honours if isinstance(honours, bool) else None
    if cfg.npu_count < 1:
        cfg.npu_count = 8
    versions = dict(DEFAULT_VERSIONS)
    versions.update(cfg.versions)
    cfg.versions = versions
    return cfg


def save_config(d: Path, cfg: NodeConfig) -> None:
    """Write ``node.json`` atomically."""
    write_json(d / NODE_FILE, cfg.to_dict())

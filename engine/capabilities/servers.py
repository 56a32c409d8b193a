"""What each Ascend server model can do about an HCCS link fault, with the source of each fact.

The console's first instinct for HCCS loss is "move intra-server traffic to RoCE"
(``HCCL_INTRA_PCIE_ENABLE=0 HCCL_INTRA_ROCE_ENABLE=1``). Whether HCCL honours that
switch depends on the server model, so the remedy is chosen from this table, and
stated before anything restarts. Pure data and pure functions: no I/O, no Django.

Sources (cited by key in every entry):

- ``hccl-env-doc``: hicann/hccl ``docs/zh/user_guide/hccl_env/HCCL_INTRA_ROCE_ENABLE.md``
  (@1bb23ddb), section 产品支持情况: "Atlas A2系列产品：仅支持此处理器型号下的 Atlas
  200T A2 Box16异构子框"; "Atlas训练系列产品：仅支持此处理器型号下的 Atlas 300T Pro训练卡";
  "Atlas A3系列产品：仅在使用LLM-DataDist作为集群管理组件的场景下生效" (on 800T/800I A3
  "HCCL通信不受影响").
- ``hccl-channel``: hicann/hccl ``src/ops/op_common/executor/channel/channel.cc``
  (~164-172): on 910B the level-1 RDMA choice is ``serverNum > 1 || (serverNum == 1
  && isDiffDeviceModule && GetExternalInputIntraRoceSwitch() > 0)``, so a server with
  one HCCS module keeps its intra-server traffic on HCCS whatever the switch says.
- ``hccl-communicator``: ``hccl_communicator.cc`` ``CheckSingleServerComm`` in the
  current HCCL and in the 2024 open-source cann-hccl: the switch is consulted for one
  server with two modules (``serverNum_ == 1 && moduleNum_ == HCCL_MODULE_NUM_TWO``,
  "910B A+X"), which is the Box16 layout. So older open releases agree; closed CANN
  releases before the open-source HCCL were not read.
- ``npucli-types``: hicann/driver ``npu_cmd_parse.c`` ``g_type_info_map_list``: ``-t hccs``
  is limited to 910B / 910_93 / 310P, ``-t hccs-bw`` to 910B / 910_93
  (shared/reference/ascend-facts.md §1.1, §2). Drivers before ~23.0.6 lack ``-t hccs``
  altogether (``npu-smi info -h`` of 23.0.rc2 ends at ``topo``), so presence is also
  probed at run time (collect's ``hccs_unsupported``).
- ``hccn-910b``: hicann/driver ``src/custom/network/hccn/ascend910B/hccn_tool`` ``-stat -g``
  (ascend-facts.md §3): the RoCE counters on A2/A3.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SOURCES: dict[str, str] = {
    "hccl-env-doc": (
        "hicann/hccl docs/zh/user_guide/hccl_env/HCCL_INTRA_ROCE_ENABLE.md "
        "(产品支持情况) @1bb23ddbf917"
    ),
    "hccl-channel": (
        "hicann/hccl src/ops/op_common/executor/channel/channel.cc ~164-172 "
        "(isA2UsedRdma: one-module server stays on HCCS)"
    ),
    "hccl-communicator": (
        "hicann/hccl (and the 2024 open-source cann-hccl) hccl_communicator.cc "
        "CheckSingleServerComm: the intra-server RoCE switch is consulted for a single "
        "server with two modules ('910B A+X'), i.e. the Box16 layout"
    ),
    "npucli-types": (
        "hicann/driver src/custom/dev_prod/user/npucli/src/npu_cmd_parse.c "
        "g_type_info_map_list (hccs: 910B/910_93/310P; hccs-bw: 910B/910_93)"
    ),
    "hccn-910b": (
        "hicann/driver src/custom/network/hccn/ascend910B/hccn_tool tool.c "
        "tool_display_roce_info (-stat -g)"
    ),
    "vllm-ascend-mc2": (
        "vllm-project/vllm-ascend vllm_ascend/utils.py is_hierarchical_communication_enabled "
        "-> vllm_ascend/ops/fused_moe/token_dispatcher.py need_expert_scale @182b75ea"
    ),
}

# The switch's effect on the generic HCCL collective path of this server model.
HONOURED, IGNORED, UNKNOWN = "honoured", "ignored", "unknown"
# Whether a remedy can have an effect here.
YES, NO = "yes", "no"  # or UNKNOWN

UNKNOWN_MODEL = "unknown"


@dataclass(frozen=True)
class ServerCapability:
    """One server model's link facts. ``sources`` maps each fact to a SOURCES key."""

    key: str
    label: str
    family: str  # "A2" | "A3" | "training" | "unknown"
    chip: str  # npu-smi chip family: 910B | 910_93 | 910 | ?
    hccs_modules: int | None  # HCCS modules (full-mesh groups) in one server
    roce_switch: str  # HONOURED | IGNORED | UNKNOWN
    roce_switch_why: str
    hccs_counters: bool | None  # npu-smi info -t hccs exists for this chip
    hccs_bw: bool | None  # npu-smi info -t hccs-bw exists for this chip
    roce_counters: bool | None  # hccn_tool -stat -g
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_A2_ONE_MODULE_WHY = (
    "HCCL ignores HCCL_INTRA_ROCE_ENABLE on this server: the HCCL env-var doc supports "
    "it on Atlas A2 only for the Atlas 200T A2 Box16, and HCCL's channel code keeps a "
    "server with one HCCS module on HCCS (isA2UsedRdma needs isDiffDeviceModule)."
)
_A3_WHY = (
    "On Atlas 800T/800I A3 the switch only affects LLM-DataDist traffic; the HCCL env-var "
    "doc says HCCL communication is not affected (HCCL通信不受影响)."
)
_LINK_SOURCES = {
    "roce_switch": ("hccl-env-doc", "hccl-channel", "hccl-communicator"),
    "hccs_counters": ("npucli-types",),
    "hccs_bw": ("npucli-types",),
    "roce_counters": ("hccn-910b",),
}


def _a3(key: str, label: str) -> ServerCapability:
    """An A3 server (800T and 800I A3 share every link fact; _A3_WHY says why)."""
    return ServerCapability(
        key=key,
        label=label,
        family="A3",
        chip="910_93",
        hccs_modules=1,
        roce_switch=IGNORED,
        roce_switch_why=_A3_WHY,
        hccs_counters=True,
        hccs_bw=True,
        roce_counters=True,
        sources={**_LINK_SOURCES, "roce_switch": ("hccl-env-doc",)},
    )


CAPABILITIES: dict[str, ServerCapability] = {
    c.key: c
    for c in (
        ServerCapability(
            key="atlas-800t-a2",
            label="Atlas 800T A2",
            family="A2",
            chip="910B",
            hccs_modules=1,  # 8 NPUs, 7 HCCS links each, one full mesh
            roce_switch=IGNORED,
            roce_switch_why=_A2_ONE_MODULE_WHY,
            hccs_counters=True,
            hccs_bw=True,
            roce_counters=True,
            sources=_LINK_SOURCES,
        ),
        ServerCapability(
            key="atlas-800i-a2",
            label="Atlas 800I A2",
            family="A2",
            chip="910B",
            hccs_modules=1,
            roce_switch=IGNORED,
            roce_switch_why=_A2_ONE_MODULE_WHY,
            hccs_counters=True,
            hccs_bw=True,
            roce_counters=True,
            sources=_LINK_SOURCES,
        ),
        ServerCapability(
            key="atlas-200t-a2-box16",
            label="Atlas 200T A2 Box16",
            family="A2",
            chip="910B",
            hccs_modules=2,  # NPUs 0-7 and 8-15, joined by PCIe (env doc 使用约束)
            roce_switch=HONOURED,
            roce_switch_why=(
                "The HCCL env-var doc names the Atlas 200T A2 Box16 as the A2 server where "
                "HCCL_INTRA_ROCE_ENABLE is supported, and HCCL's channel code moves a "
                "two-module server's intra-server traffic to RDMA when the switch is on."
            ),
            hccs_counters=True,
            hccs_bw=True,
            roce_counters=True,
            sources=_LINK_SOURCES,
        ),
        ServerCapability(
            key="atlas-300t-pro",
            label="Atlas 300T Pro",
            family="training",
            chip="910",
            hccs_modules=None,
            roce_switch=HONOURED,
            roce_switch_why=(
                "The HCCL env-var doc names the Atlas 300T Pro training card as the Atlas "
                "training product where HCCL_INTRA_ROCE_ENABLE is supported."
            ),
            # -t hccs / -t hccs-bw are not built for the 910 training chip (npucli-types)
            hccs_counters=False,
            hccs_bw=False,
            roce_counters=None,  # the 910 build of hccn_tool was not read
            sources={**_LINK_SOURCES, "roce_switch": ("hccl-env-doc",)},
        ),
        _a3("atlas-800t-a3", "Atlas 800T A3"),
        _a3("atlas-800i-a3", "Atlas 800I A3"),
        ServerCapability(
            key=UNKNOWN_MODEL,
            label="Unknown server model",
            family="unknown",
            chip="?",
            hccs_modules=None,
            roce_switch=UNKNOWN,
            roce_switch_why=(
                "The server model is not known, and whether HCCL honours "
                "HCCL_INTRA_ROCE_ENABLE depends on it (only the Atlas 200T A2 Box16 and "
                "the Atlas 300T Pro per the HCCL env-var doc). Set the node's server model "
                "(detected at preflight, or a site override) to enable the RoCE failover."
            ),
            hccs_counters=None,
            hccs_bw=None,
            roce_counters=None,
            sources={"roce_switch": ("hccl-env-doc",)},
        ),
    )
}

SERVER_MODELS: tuple[str, ...] = tuple(CAPABILITIES)
SERVER_MODEL_LABELS: dict[str, str] = {k: c.label for k, c in CAPABILITIES.items()}


def capability(server_model: str | None) -> ServerCapability:
    """The capability entry of ``server_model``; anything unrecognised is ``unknown``."""
    return CAPABILITIES.get(server_model or UNKNOWN_MODEL, CAPABILITIES[UNKNOWN_MODEL])

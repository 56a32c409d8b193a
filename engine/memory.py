"""Will a profile fit in NPU HBM? A first-order estimate, per NPU.

Formula (all sizes in GiB; npu-smi reports a 64 GB 910B as 65536 MB):

    world      = nodes × NPUs per node            (the hardware sets the DP width)
    EP         = world / PP if expert parallel, else TP
    expert     = (total − active) params   (MoE: what is not active is expert weight)
    dense      = active params             (attention, shared expert, embeddings)
    weights    = (expert / EP + dense / TP) / PP × bytes per param
    reserve    = HCCL communicators × 2 × HCCL_BUFFSIZE + RUNTIME_WORKSPACE_GB
    usable     = HBM × gpu_memory_utilization
    KV         = usable − weights − reserve
    per token  = KV layers / PP × 2 (K and V) × ceil(KV heads / TP) × head dim × 2 bytes
    KV tokens  = KV / per token                    (tokens one DP replica can cache)
    fits       = KV > 0 and KV tokens ≥ max_model_len

The expert share slightly undercounts (the active params include the routed
experts that fire per token), which the workspace allowance absorbs. Linear
attention state (Gated DeltaNet layers) is constant per sequence and is also
left to the workspace allowance.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.plans import ProfileSpec

GIB = 1024**3

# Activation workspace, sampler and graph-capture buffers outside weights and KV;
# vllm-ascend's profiling run measures a few GiB on A2 for large MoE models.
RUNTIME_WORKSPACE_GB = 4.0

DTYPE_BYTES = {
    "bfloat16": 2.0,
    "float16": 2.0,
    "half": 2.0,
    "auto": 2.0,
    "float32": 4.0,
    "float": 4.0,
}

# Bytes per weight for a quantized checkpoint, by the scheme named in the model path.
SCHEME_BYTES = {
    "w8a8": 1.0,
    "w8a16": 1.0,
    "w4a8": 0.5,
    "w4a16": 0.5,
    "int8": 1.0,
    "int4": 0.5,
}

# Quantization methods whose bytes per weight do not depend on the checkpoint name.
QUANT_BYTES = {"fp8": 1.0, "awq": 0.5, "gptq": 0.5}


@dataclass(frozen=True)
class FitReport:
    """A plan's per-NPU memory budget, and whether it has room for a full sequence."""

    weights_gb_per_npu: float
    reserve_gb: float
    usable_gb: float
    kv_gb_per_npu: float
    kv_tokens: int
    fits: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FitReport:
        return cls(**data)


def bytes_per_param(profile: ProfileSpec) -> tuple[float, str]:
    """Bytes per weight and the scheme it was read from (e.g. (1.0, "w8a8")).

    quantization "ascend" (vllm-ascend's method) covers W8A8 and W4A8 checkpoints;
    the scheme is read from the model path, then the profile name, and defaults to W8A8.
    """
    quant = (profile.quantization or "").lower()
    if not quant:
        dtype = profile.dtype.lower()
        if dtype not in DTYPE_BYTES:
            raise ValueError(
                f"unknown dtype {profile.dtype!r}; use one of {', '.join(DTYPE_BYTES)}"
            )
        return DTYPE_BYTES[dtype], dtype
    if quant in QUANT_BYTES:
        return QUANT_BYTES[quant], quant
    # the checkpoint path is the stronger evidence; the profile name is typed by hand
    for label in (profile.model_path.lower(), profile.name.lower()):
        for scheme, size in SCHEME_BYTES.items():
            if scheme in label:
                return size, scheme
    return 1.0, "w8a8"


def _communicators(profile: ProfileSpec, ep: int) -> int:
    """HCCL communicators a rank holds: TP, plus EP, DP and PP groups if present."""
    count = 1
    if profile.expert_parallel and ep > profile.tp:
        count += 1
    if profile.dp > 1:
        count += 1
    if profile.pp > 1:
        count += 1
    return count


def estimate_fit(
    profile: ProfileSpec, hbm_gb: float, npus_per_node: int, nodes: int
) -> FitReport:
    """Per-NPU memory budget of `profile` on `nodes` × `npus_per_node` NPUs of `hbm_gb`.

    See the module docstring for the formula. Raises ValueError for sizes that
    cannot be estimated (non-positive counts, unknown dtype).
    """
    if nodes < 1 or npus_per_node < 1 or hbm_gb <= 0:
        raise ValueError("nodes, npus_per_node and hbm_gb must be positive")
    if profile.tp < 1 or profile.pp < 1:
        raise ValueError("tensor and pipeline parallel sizes must be at least 1")
    size, scheme = bytes_per_param(profile)
    world = nodes * npus_per_node
    ep = max(1, world // profile.pp) if profile.expert_parallel else profile.tp
    expert_b = (
        max(0.0, profile.total_params_b - profile.active_params_b)
        if profile.num_experts > 0
        else 0.0
    )
    dense_b = profile.total_params_b - expert_b
    weights = (expert_b / ep + dense_b / profile.tp) / profile.pp * size * 1e9 / GIB

    comms = _communicators(profile, ep)
    hccl_gb = comms * 2 * profile.hccl_buffsize_mb / 1024
    reserve = hccl_gb + RUNTIME_WORKSPACE_GB
    util = profile.gpu_memory_utilization
    usable = hbm_gb * util
    kv_gb = usable - weights - reserve

    kv_tokens = _kv_tokens(profile, kv_gb)
    fits = kv_gb > 0 and kv_tokens >= profile.max_model_len

    budget = (
        f"weights {weights:.1f} GiB/NPU ({expert_b:.1f}B expert params over EP{ep}, "
        f"{dense_b:.1f}B dense over TP{profile.tp}, PP{profile.pp}, "
        f"{scheme} {size:g} B/param) "
        f"+ reserve {reserve:.1f} GiB (HCCL {comms}×2×{profile.hccl_buffsize_mb} MiB "
        f"+ {RUNTIME_WORKSPACE_GB:g} GiB workspace) "
        f"of usable {usable:.1f} GiB ({hbm_gb:g} GiB × {util:g}) "
        f"on {nodes}×{npus_per_node} NPUs"
    )
    return FitReport(
        weights_gb_per_npu=round(weights, 2),
        reserve_gb=round(reserve, 2),
        usable_gb=round(usable, 2),
        kv_gb_per_npu=round(kv_gb, 2),
        kv_tokens=kv_tokens,
        fits=fits,
        detail=_fit_detail(profile, budget, kv_gb, kv_tokens, fits),
    )


def _kv_tokens(profile: ProfileSpec, kv_gb: float) -> int:
    """Tokens of KV cache that ``kv_gb`` GiB hold on one NPU (0 when nothing is left)."""
    kv_layers = (
        profile.kv_layers if profile.kv_layers is not None else profile.num_layers
    )
    kv_bytes = DTYPE_BYTES.get(profile.dtype.lower(), 2.0)
    # fewer KV heads than TP ranks: each rank keeps a replica of one head
    heads_per_rank = math.ceil(profile.num_kv_heads / profile.tp)
    per_token = (
        math.ceil(kv_layers / profile.pp)
        * 2
        * heads_per_rank
        * profile.head_dim
        * kv_bytes
    )
    return int(kv_gb * GIB // per_token) if kv_gb > 0 and per_token > 0 else 0


def _fit_detail(
    profile: ProfileSpec, budget: str, kv_gb: float, kv_tokens: int, fits: bool
) -> str:
    """The sentence that says whether it fits and, when not, what to change."""
    if fits:
        detail = (
            f"fits: {budget} leaves {kv_gb:.1f} GiB KV = {kv_tokens} tokens "
            f"(max_model_len {profile.max_model_len})"
        )
    elif kv_gb <= 0:
        detail = (
            f"does not fit: {budget} is short by {-kv_gb:.1f} GiB per NPU; "
            "add nodes, use a quantized (W8A8) checkpoint "
            "or raise gpu_memory_utilization"
        )
    else:
        detail = (
            f"does not fit: {budget} leaves {kv_gb:.1f} GiB KV = {kv_tokens} tokens, "
            f"fewer than max_model_len {profile.max_model_len}; "
            "lower max_model_len or add nodes"
        )
    return detail


def _first_int(config: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def model_facts_from_config(path: str) -> dict[str, int] | None:
    """Model facts from `<path>/config.json` (HF keys); None without that file.

    Returns a subset of num_layers, hidden_size, num_kv_heads, head_dim,
    num_experts and kv_layers (layers holding a KV cache, for hybrid
    linear/full attention models). Multimodal configs are read from their
    "text_config". Raises ValueError when the file exists but is not a JSON object.
    """
    config_path = Path(path) / "config.json"
    try:
        if not config_path.is_file():
            return None
    except (
        OSError
    ):  # e.g. a path segment longer than the filesystem allows: no such file
        return None
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"unrecognized model config {config_path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(
            f"unrecognized model config {config_path}: expected a JSON object"
        )
    config: dict[str, Any] = dict(raw)
    text = raw.get("text_config")
    if isinstance(text, dict):
        config.update(text)

    facts: dict[str, int] = {}
    found = {
        "num_layers": _first_int(config, "num_hidden_layers", "n_layer", "num_layers"),
        "hidden_size": _first_int(config, "hidden_size", "n_embd"),
        "num_kv_heads": _first_int(
            config, "num_key_value_heads", "num_attention_heads"
        ),
        "head_dim": _first_int(config, "head_dim"),
        "num_experts": _first_int(
            config, "num_experts", "n_routed_experts", "num_local_experts"
        ),
    }
    heads = _first_int(config, "num_attention_heads")
    if found["head_dim"] is None and found["hidden_size"] and heads:
        found["head_dim"] = found["hidden_size"] // heads
    layer_types = config.get("layer_types")
    interval = _first_int(config, "full_attention_interval")
    if isinstance(layer_types, list) and layer_types:
        found["kv_layers"] = sum(1 for kind in layer_types if kind == "full_attention")
    elif interval and found["num_layers"]:
        found["kv_layers"] = found["num_layers"] // interval
    for key, value in found.items():
        if value is not None:
            facts[key] = value
    return facts

"""The model directory a simulated node holds: a tiny real Hugging Face-format copy.

``engine/sim/models/Qwen3.5-397B-A17B`` carries a ``config.json`` with the
architecture of Qwen3.5-397B-A17B (60 layers of 3 Gated DeltaNet + 1 gated
attention, 512 experts with 10 routed + 1 shared, hidden 4096, 32 Q / 2 KV heads of
256, vocab 248,320, 262,144 context — the figures of /work/shared/reference
vllm-facts.md §5, from transcriptions of the model card; the HF keys are those of
transformers' Qwen3_5Moe config: ``text_config``, ``layer_types``, ``num_experts``),
a ``model.safetensors.index.json`` and four small real safetensors shards. Each sim
node gets its own copy under its state directory on first use, so a test can change
one node's shard and see preflight name it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from engine.sim.state import node_dir

TEMPLATES = Path(__file__).with_name("models")
DEFAULT_TEMPLATE = "Qwen3.5-397B-A17B"


def node_model_dir(
    model_path: str, node: str | None = None, base: str | Path | None = None
) -> Path:
    """This sim node's copy of ``model_path`` (seeded from the template of the same
    base name, else the Qwen3.5 template)."""
    name = Path(model_path).name or DEFAULT_TEMPLATE
    target = node_dir(node, base) / "models" / name
    if not target.exists():
        template = TEMPLATES / name
        if not template.is_dir():
            template = TEMPLATES / DEFAULT_TEMPLATE
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(template, target)
    return target

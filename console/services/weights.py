"""The model files as the nodes report them (engine/weights.py), compared across nodes.

The preflight runbook calls ``cross_node_checks`` with the nodes' ``node.preflight``
answers (each carries ``weights``, the node's manifest) and builds the plan with
``reported_config``: the fit estimate then uses the config.json the nodes hold, not a
file on the console (which holds no weights in production).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from console.models import EngineProfile
from console.opschecks import check
from engine import checktext, weights

FACT_KEYS = (
    "num_layers",
    "hidden_size",
    "num_kv_heads",
    "head_dim",
    "num_experts",
    "kv_layers",
)


def reported_config(answers: dict[str, Any]) -> dict[str, Any] | None:
    """The config.json facts most nodes report (None when no node reported one)."""
    configs = [
        json.dumps(a["weights"]["config"], sort_keys=True)
        for a in answers.values()
        if isinstance(a, dict) and (a.get("weights") or {}).get("config")
    ]
    if not configs:
        return None
    return dict(json.loads(Counter(configs).most_common(1)[0][0]))


def first_of(items: list[Any], shown: int = 10) -> dict[str, Any]:
    """The first ``shown`` items, then "and N more" (engine/checktext.py items)."""
    more = [checktext.item("item.and_more", count=len(items) - shown)]
    return checktext.join(items[:shown] + (more if len(items) > shown else []))


def cross_node_checks(
    answers: dict[str, Any], profile: EngineProfile
) -> dict[str, list[dict[str, Any]]]:
    """Per node: a failing "same model files" check naming the files that differ from
    the majority; under "cluster": a warning naming profile figures config.json contradicts."""
    manifests = {
        name: a["weights"]
        for name, a in answers.items()
        if isinstance(a, dict) and a.get("weights")
    }
    out: dict[str, list[dict[str, Any]]] = {}
    for node, diffs in weights.compare_items(manifests).items():
        out.setdefault(node, []).append(
            check(
                "same_model_files.bad",
                "fail",
                problems=first_of(diffs),
                node=node,
            )
        )
    config = reported_config(answers)
    declared = {k: getattr(profile, k, None) for k in FACT_KEYS}
    disagree = weights.disagreement_items(declared, config)
    if disagree:
        out.setdefault("cluster", []).append(
            check("profile_figures.warn", "warn", problems=checktext.join(disagree))
        )
    return out

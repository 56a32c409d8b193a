"""Preflight's weights comparison and the fit estimate from the config.json the nodes report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from console.services.plans import cluster_plan, profile_spec
from console.services.weights import cross_node_checks, reported_config
from engine.sim.models import node_model_dir

SHARD = "model-00003-of-00004.safetensors"
CODE = (
    "import json, sys; from engine.preflight import run_preflight; "
    "r = run_preflight(expected_npus=8, host_ip='127.0.0.1', ports=[], "
    "model_path=sys.argv[1], ping_targets=[]); print(json.dumps(r))"
)


def _answers(tmp_path: Path, model_path: str, nodes: list[str]) -> dict[str, Any]:
    out = {}
    for node in nodes:
        env = {
            "ENGINE_DRIVER": "sim",
            "SIM_STATE_DIR": str(tmp_path),
            "SIM_NODE": node,
            "PATH": "/usr/bin:/bin",
        }
        run = subprocess.run(
            [sys.executable, "-c", CODE, model_path],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        out[node] = json.loads(run.stdout)
    return out


def test_one_shard_of_another_size_fails_naming_it(
    cluster: Any, tmp_path: Path
) -> None:
    path = cluster.profile.model_path
    copy = node_model_dir(path, "ascend-03", base=tmp_path)
    (copy / SHARD).write_bytes((copy / SHARD).read_bytes()[:-7])
    answers = _answers(
        tmp_path, path, ["ascend-01", "ascend-02", "ascend-03", "ascend-04"]
    )
    checks = cross_node_checks(answers, cluster.profile)
    assert list(checks) == ["ascend-03"] or set(checks) <= {"ascend-03", "cluster"}
    (fail,) = checks["ascend-03"]
    assert fail["status"] == "fail" and fail["name"] == "same model files"
    assert f"{SHARD}: 279 bytes here, 286 bytes on most nodes" in fail["evidence"]


def test_the_fit_uses_the_config_the_nodes_report(cluster: Any, tmp_path: Path) -> None:
    profile = cluster.profile
    # figures typed in wrongly
    profile.num_layers, profile.num_experts, profile.kv_layers = 94, 128, 30
    answers = _answers(tmp_path, profile.model_path, ["ascend-01", "ascend-02"])
    config = reported_config(answers)
    assert config["num_layers"] == 60 and config["num_experts"] == 512
    assert profile_spec(profile).num_layers == 94  # no config.json on the console
    assert profile_spec(profile, config).num_layers == 60
    typed = cluster_plan(cluster, profile=profile).fit.to_dict()
    reported = cluster_plan(cluster, profile=profile, model_config=config).fit.to_dict()
    assert reported["kv_tokens"] == 2 * typed["kv_tokens"]  # 15 KV layers, not 30
    warn = cross_node_checks(answers, profile)["cluster"][0]
    assert warn["status"] == "warn"
    assert "num_layers: profile says 94, config.json says 60" in warn["evidence"]
    assert "num_experts: profile says 128, config.json says 512" in warn["evidence"]

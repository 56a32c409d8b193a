"""The model-directory manifest, its comparison across nodes, and sha256 on demand."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from engine import weights
from engine.memory import model_facts_from_config
from engine.sim.models import DEFAULT_TEMPLATE, TEMPLATES, node_model_dir
from tests.fresh import fresh_python

SHARD = "model-00002-of-00004.safetensors"


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(TEMPLATES / DEFAULT_TEMPLATE, target)
    return target


def test_the_sim_model_is_a_real_hf_directory():
    root = TEMPLATES / DEFAULT_TEMPLATE
    facts = model_facts_from_config(str(root))
    assert facts == {
        "num_layers": 60,
        "hidden_size": 4096,
        "num_kv_heads": 2,
        "head_dim": 256,
        "num_experts": 512,
        "kv_layers": 15,
    }
    for shard in json.loads((root / weights.INDEX).read_text())["weight_map"].values():
        blob = (root / shard).read_bytes()
        header_len = int.from_bytes(blob[:8], "little")
        json.loads(blob[8 : 8 + header_len])  # a safetensors header


def test_it_reports_sizes_index_and_config(tmp_path):
    m = weights.manifest(_copy(tmp_path, "a"))
    assert m["problems"] == []
    assert len(m["index"]["shards"]) == 4 and m["index"]["missing"] == []
    assert m["config"]["num_experts"] == 512 and m["config"]["dtype"] == "bfloat16"
    assert m["files"][SHARD] == (tmp_path / "a" / SHARD).stat().st_size
    assert weights.check(m)["status"] == "pass"


def test_a_missing_shard_fails_naming_it(tmp_path):
    root = _copy(tmp_path, "a")
    (root / SHARD).unlink()
    result = weights.check(weights.manifest(root))
    assert result["status"] == "fail" and SHARD in result["evidence"]


def test_one_shard_of_another_size_is_named(tmp_path):
    a, b, c = (weights.manifest(_copy(tmp_path, n)) for n in "abc")
    with (tmp_path / "b" / SHARD).open("ab") as f:
        f.write(b"\0" * 10)
    b = weights.manifest(tmp_path / "b")
    diff = weights.compare({"ascend-01": a, "ascend-02": b, "ascend-03": c})
    assert list(diff) == ["ascend-02"]
    (line,) = diff["ascend-02"]
    assert line.startswith(SHARD) and "296 bytes here, 286 bytes on most nodes" in line


def test_sha256_is_cached_by_size_and_mtime(tmp_path):
    root = _copy(tmp_path, "a")
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    cache = weights.HashCache(tmp_path / "cache.json")
    seen: list[dict] = []
    first, state = weights.hash_manifest(root, cache, seen.append)
    assert len(first) == 6 and seen
    # progress: cumulative bytes over the whole directory, ending at the total
    dones = [s["done"] for s in seen]
    assert dones == sorted(dones) and seen[-1]["done"] == total == state["total"]
    assert state["files_done"] == state["files"] == 6
    assert state["cached"] == 0 and state["bytes_read"] == total
    seen.clear()
    again, state = weights.hash_manifest(
        root, weights.HashCache(tmp_path / "cache.json"), seen.append
    )
    assert again == first  # nothing read again:
    assert state["cached"] == 6 and state["bytes_read"] == 0 and state["done"] == total
    path = root / SHARD
    data = bytearray(path.read_bytes())
    data[-1] = 1  # same size, new content and mtime
    path.write_bytes(bytes(data))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    third, state = weights.hash_manifest(root, cache)
    assert third[SHARD] != first[SHARD]
    assert state["cached"] == 5 and state["bytes_read"] == path.stat().st_size
    m_a, m_b = weights.manifest(_copy(tmp_path, "b")), weights.manifest(root)
    m_a["sha256"], m_b["sha256"] = first, third
    m_c = dict(m_a)
    diff = weights.compare({"n1": m_a, "n2": m_b, "n3": m_c})
    assert list(diff) == ["n2"] and "sha256" in diff["n2"][0]


def test_profile_figures_that_config_contradicts_are_flagged():
    config = model_facts_from_config(str(TEMPLATES / DEFAULT_TEMPLATE))
    out = weights.declared_disagreements({"num_layers": 94, "num_experts": 512}, config)
    assert out == ["num_layers: profile says 94, config.json says 60"]


def test_sim_nodes_report_their_own_copy_in_preflight(tmp_path):
    code = (
        "import json; from engine.preflight import run_preflight; "
        "r = run_preflight(expected_npus=8, host_ip='127.0.0.1', ports=[], "
        "model_path='/data/models/Qwen3.5-397B-A17B', ping_targets=[]); "
        "print(json.dumps(r['weights']))"
    )
    answers = {}
    for node in ("ascend-01", "ascend-02", "ascend-03"):
        env = {
            "ENGINE_DRIVER": "sim",
            "SIM_STATE_DIR": str(tmp_path),
            "SIM_NODE": node,
            "PATH": "/usr/bin:/bin",
        }
        if node == "ascend-02":  # this node's own copy, one shard a byte longer
            copy = node_model_dir("/data/models/Qwen3.5-397B-A17B", node, base=tmp_path)
            with (copy / SHARD).open("ab") as f:
                f.write(b"x")
        out = fresh_python("-c", code, env=env, check=True)
        answers[node] = json.loads(out.stdout)
    assert answers["ascend-01"]["path"] == "/data/models/Qwen3.5-397B-A17B"
    assert answers["ascend-01"]["config"]["num_layers"] == 60
    diff = weights.compare(answers)
    assert list(diff) == ["ascend-02"] and SHARD in diff["ascend-02"][0]

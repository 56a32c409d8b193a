"""The vllm-ascend release matrix and the node check against it."""

from __future__ import annotations

import json

from engine import compat
from engine.sim.state import DEFAULT_VERSIONS, load_config, node_dir, save_config
from tests.fresh import fresh_python


def test_it_holds_the_published_rows_with_their_source_commit():
    src = compat.source()
    assert len(src["commit"]) == 40
    rel = compat.release("v0.23.0")
    assert (rel.cann, rel.torch_npu, rel.triton_ascend, rel.mooncake) == (
        "9.1.0",
        "2.10.0.post4",
        "3.2.2",
        "0.3.11.post1",
    )
    assert compat.release("0.13.0rc1").triton_ascend is None
    assert compat.release("0.10.1rc1").vllm == ("0.10.1", "0.10.1.1")


def test_it_names_the_a2_and_a3_images():
    assert compat.image("0.23.0", "a2") == "quay.io/ascend/vllm-ascend:v0.23.0"
    assert compat.image("v0.23.0", "a3") == "quay.io/ascend/vllm-ascend:v0.23.0-a3"
    assert (
        compat.image("0.23.0", "a3", "openeuler")
        == "quay.io/ascend/vllm-ascend:v0.23.0-a3-openeuler"
    )


def test_it_passes_the_sim_default_stack():
    assert compat.check(dict(DEFAULT_VERSIONS), "0.23.0")["status"] == "pass"


def test_it_fails_torch_npu_from_another_release_naming_it():
    found = {**DEFAULT_VERSIONS, "torch_npu": "2.10.0.post2"}
    result = compat.check(found, "0.23.0")
    assert result["status"] == "fail"
    assert "torch_npu 2.10.0.post2" in result["evidence"]
    assert "needs 2.10.0.post4" in result["evidence"]
    assert "0.23.0rc1" in result["evidence"]  # the release it belongs to
    assert "cann" not in result["evidence"]


def test_it_fails_a_target_the_node_does_not_run():
    result = compat.check(dict(DEFAULT_VERSIONS), "0.22.1rc1")
    assert result["status"] == "fail"
    assert "vllm_ascend 0.23.0" in result["evidence"]
    assert "cann 9.1.0 (vllm-ascend 0.22.1rc1 needs 9.0.0)" in result["evidence"]


def test_it_fails_an_unknown_target():
    assert "not in the release matrix" in compat.check({}, "9.9.9")["evidence"]


def test_a_sim_node_with_foreign_torch_npu_fails_preflight(tmp_path):
    d = node_dir("ascend-02", base=tmp_path)
    cfg = load_config(d)
    cfg.versions["torch_npu"] = "2.9.0"
    save_config(d, cfg)
    code = (
        "import json; from engine.preflight import run_preflight; "
        "r = run_preflight(expected_npus=8, host_ip='127.0.0.1', ports=[], "
        "model_path='', ping_targets=[], vllm_ascend_version='0.23.0'); "
        "print(json.dumps([c for c in r['checks'] if c['name'] == 'release matrix']))"
    )
    env = {
        "ENGINE_DRIVER": "sim",
        "SIM_STATE_DIR": str(tmp_path),
        "SIM_NODE": "ascend-02",
        "PATH": "/usr/bin:/bin",
    }
    out = fresh_python("-c", code, env=env, check=True)
    (found,) = json.loads(out.stdout)
    assert found["status"] == "fail"
    assert "torch_npu 2.9.0" in found["evidence"]
    assert "0.19.1rc1" in found["evidence"]

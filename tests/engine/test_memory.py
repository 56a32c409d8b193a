from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.memory import GIB, bytes_per_param, estimate_fit, model_facts_from_config
from tests.engine.test_plans import demo_profile, w8a8_profile


def test_it_fits_397b_bf16_on_four_a2() -> None:
    fit = estimate_fit(demo_profile(), hbm_gb=64, npus_per_node=8, nodes=4)
    assert fit.fits
    assert fit.weights_gb_per_npu == 26.08  # 380B/32 + 17B/8 params, 2 bytes each
    assert fit.usable_gb == 57.6
    assert fit.kv_tokens >= 32768


def test_it_refuses_397b_bf16_on_two_a2_with_the_numbers() -> None:
    fit = estimate_fit(demo_profile(dp=2), hbm_gb=64, npus_per_node=8, nodes=2)
    assert not fit.fits
    assert fit.kv_gb_per_npu < 0 and fit.kv_tokens == 0
    assert "weights 48.2 GiB/NPU" in fit.detail
    assert "usable 57.6 GiB" in fit.detail
    assert "short by 0.6 GiB per NPU" in fit.detail


def test_it_fits_w8a8_on_two_a2() -> None:
    fit = estimate_fit(w8a8_profile(), hbm_gb=64, npus_per_node=8, nodes=2)
    assert fit.fits
    assert fit.weights_gb_per_npu == 24.1
    assert "w8a8 1 B/param" in fit.detail


def test_it_takes_the_dp_width_from_the_hardware() -> None:
    # the same DP4 profile judged on 16 NPUs is what DP2 would be: experts over EP16
    assert estimate_fit(demo_profile(), 64, 8, 2) == estimate_fit(
        demo_profile(dp=2), 64, 8, 2
    )


def test_it_computes_a_dense_model_exactly() -> None:
    profile = demo_profile(
        total_params_b=8.0,
        active_params_b=8.0,
        num_experts=0,
        expert_parallel=False,
        dp=1,
        tp=2,
        num_layers=36,
        kv_layers=None,
        num_kv_heads=8,
        head_dim=128,
        hccl_buffsize_mb=512,
        gpu_memory_utilization=0.5,
        max_model_len=4096,
    )
    fit = estimate_fit(profile, hbm_gb=64, npus_per_node=2, nodes=1)
    assert fit.weights_gb_per_npu == round(8e9 / 2 * 2 / GIB, 2)
    assert (
        fit.reserve_gb == 5.0
    )  # one TP communicator: 2 × 512 MiB, plus 4 GiB workspace
    per_token = 36 * 2 * 4 * 128 * 2  # layers × K,V × heads per rank × head dim × bf16
    kv = 32 - 8e9 / GIB - 5.0
    assert fit.kv_tokens == int(kv * GIB // per_token)


def test_it_refuses_when_one_sequence_does_not_fit() -> None:
    fit = estimate_fit(
        demo_profile(dp=2, gpu_memory_utilization=1.0, max_model_len=10_000_000),
        64,
        8,
        2,
    )
    assert not fit.fits and fit.kv_gb_per_npu > 0
    assert "fewer than max_model_len 10000000" in fit.detail


def test_it_reads_the_quantization_scheme_from_the_checkpoint_name() -> None:
    assert bytes_per_param(w8a8_profile()) == (1.0, "w8a8")
    assert bytes_per_param(
        w8a8_profile(model_path="/m/Qwen3.5-397B-A17B-w4a8-mtp")
    ) == (0.5, "w4a8")
    assert bytes_per_param(demo_profile()) == (2.0, "bfloat16")
    with pytest.raises(ValueError, match="unknown dtype"):
        bytes_per_param(demo_profile(dtype="bf17"))


def test_it_reads_model_facts_from_config_json(tmp_path: Path) -> None:
    layer_types = (["linear_attention"] * 3 + ["full_attention"]) * 15
    config = {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "text_config": {
            "num_hidden_layers": 60,
            "hidden_size": 4096,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "num_experts": 512,
            "num_attention_heads": 32,
            "layer_types": layer_types,
        },
    }
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert model_facts_from_config(str(tmp_path)) == {
        "num_layers": 60,
        "hidden_size": 4096,
        "num_kv_heads": 2,
        "head_dim": 256,
        "num_experts": 512,
        "kv_layers": 15,
    }


def test_it_derives_head_dim_and_reads_deepseek_keys(tmp_path: Path) -> None:
    config = {
        "num_hidden_layers": 61,
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "n_routed_experts": 256,
    }
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    facts = model_facts_from_config(str(tmp_path))
    assert facts == {
        "num_layers": 61,
        "hidden_size": 7168,
        "num_kv_heads": 128,
        "head_dim": 56,
        "num_experts": 256,
    }


def test_it_returns_none_without_config_and_raises_on_garbage(tmp_path: Path) -> None:
    assert model_facts_from_config(str(tmp_path)) is None
    (tmp_path / "config.json").write_text("not json", encoding="utf-8")
    with pytest.raises(ValueError, match="unrecognized model config"):
        model_facts_from_config(str(tmp_path))

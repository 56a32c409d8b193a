from __future__ import annotations

import json

import pytest

from engine.flags import (
    FLAGLISTS,
    SUPPORTED_VERSIONS,
    FlagProblem,
    check_argv,
    flag_table,
    removed_flags,
)

# vllm-ascend Qwen3.5-397B tutorial §5.2, node0, W8A8 on 2 × A2
# (reference/vllm-facts.md §4.1)
RECIPE_NODE0 = [
    "Eco-Tech/Qwen3.5-397B-A17B-w8a8-mtp",
    "--host",
    "0.0.0.0",
    "--port",
    "8000",
    "--data-parallel-size",
    "2",
    "--api-server-count",
    "2",
    "--data-parallel-size-local",
    "1",
    "--data-parallel-address",
    "127.0.1.1",
    "--data-parallel-rpc-port",
    "13389",
    "--seed",
    "1024",
    "--served-model-name",
    "qwen3.5",
    "--tensor-parallel-size",
    "8",
    "--enable-expert-parallel",
    "--max-num-seqs",
    "16",
    "--max-model-len",
    "32768",
    "--max-num-batched-tokens",
    "4096",
    "--trust-remote-code",
    "--gpu-memory-utilization",
    "0.9",
    "--no-enable-prefix-caching",
    "--quantization",
    "ascend",
    "--speculative-config",
    '{"method": "qwen3_5_mtp", "num_speculative_tokens": 3}',
    "--compilation-config",
    '{"cudagraph_mode":"FULL_DECODE_ONLY"}',
    "--additional-config",
    '{"enable_cpu_binding":true, "multistream_overlap_shared_expert": true}',
]


def messages(argv: list[str], version: str = "0.23.0") -> list[str]:
    return [problem.message for problem in check_argv(argv, version)]


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_it_accepts_the_vllm_ascend_recipe(version: str) -> None:
    assert check_argv(RECIPE_NODE0, version) == []


def test_it_refuses_an_unknown_version_naming_the_supported_ones() -> None:
    with pytest.raises(ValueError, match=r"0\.23\.0, 0\.33\.0"):
        flag_table("0.9.2")
    with pytest.raises(ValueError, match="supported versions"):
        check_argv(["m"], "1.0.0")


def test_it_rejects_num_scheduler_steps_naming_0_23() -> None:
    problems = check_argv(["m", "--num-scheduler-steps", "8"], "0.23.0")
    assert problems == [
        FlagProblem(
            "--num-scheduler-steps",
            "--num-scheduler-steps was removed before vLLM 0.23.0; "
            "drop it (multi-step scheduling is gone)",
        )
    ]


def test_it_names_the_replacement_of_disable_log_requests() -> None:
    assert messages(["m", "--disable-log-requests"], "0.33.0") == [
        "--disable-log-requests was removed before vLLM 0.23.0; "
        "use --no-enable-log-requests instead "
        "(request logging is off by default; --enable-log-requests turns it on)"
    ]
    assert check_argv(["m", "--no-enable-log-requests"], "0.33.0") == []


def test_it_rejects_flag_removed_in_0_33() -> None:
    assert check_argv(["m", "--root-path", "/llm"], "0.23.0") == []
    [message] = messages(["m", "--root-path", "/llm"], "0.33.0")
    assert message.startswith(
        "--root-path was removed by vLLM 0.33.0 (0.23.0 still has it); drop it"
    )


def test_it_knows_every_flag_the_lists_drop_between_versions() -> None:
    old, new = (set(flag_table(v)) for v in SUPPORTED_VERSIONS)
    removed = removed_flags()
    assert old - new <= set(removed)
    for name, entry in removed.items():
        if entry.removed_before is not None:
            assert all(name not in flag_table(v) for v in SUPPORTED_VERSIONS), name
        else:
            assert entry.removed_in is not None and name not in flag_table(
                entry.removed_in
            ), name


def test_it_types_only_flags_some_list_has() -> None:
    types = json.loads((FLAGLISTS / "types.json").read_text(encoding="utf-8"))
    listed = set().union(*(flag_table(v) for v in SUPPORTED_VERSIONS))
    assert set(types["flags"]) <= listed


def test_it_suggests_a_close_spelling() -> None:
    [message] = messages(["m", "--tensor-paralel-size", "8"])
    assert (
        message == "--tensor-paralel-size is not a vllm serve flag in vLLM 0.23.0; "
        "did you mean --tensor-parallel-size?"
    )


def test_it_checks_value_types() -> None:
    assert messages(["m", "--tensor-parallel-size", "eight"]) == [
        "--tensor-parallel-size takes a whole number, got 'eight'"
    ]
    assert messages(["m", "--gpu-memory-utilization=high"]) == [
        "--gpu-memory-utilization takes a number, got 'high'"
    ]
    assert messages(["m", "--dtype", "bf16"])[0].startswith(
        "--dtype takes one of auto, half"
    )
    assert messages(["m", "--speculative-config", "{method: mtp}"])[0].startswith(
        "--speculative-config takes a JSON value"
    )


def test_it_accepts_inline_values_and_negative_numbers() -> None:
    assert (
        check_argv(
            ["m", "--tensor-parallel-size=8", "--seed", "-1", "--dtype=bfloat16"],
            "0.33.0",
        )
        == []
    )


def test_it_handles_boolean_optional_flags() -> None:
    assert (
        check_argv(
            ["m", "--no-enable-prefix-caching", "--no-trust-remote-code"], "0.23.0"
        )
        == []
    )
    assert messages(["m", "--no-tensor-parallel-size"])[0].startswith(
        "--no-tensor-parallel-size is not a vllm serve flag"
    )
    assert messages(["m", "--trust-remote-code=true"]) == [
        "--trust-remote-code is a switch and takes no value; drop '=true'"
    ]


def test_it_reports_missing_values_and_duplicates() -> None:
    assert messages(["m", "--max-model-len", "--trust-remote-code"]) == [
        "--max-model-len needs a value"
    ]
    assert messages(["m", "--enable-prefix-caching", "--no-enable-prefix-caching"]) == [
        "--no-enable-prefix-caching is given more than once; keep one"
    ]


def test_it_takes_several_served_model_names() -> None:
    assert (
        check_argv(
            ["m", "--served-model-name", "qwen3.5", "qwen", "--port", "8000"], "0.23.0"
        )
        == []
    )


def test_it_reports_a_missing_model_and_stray_arguments() -> None:
    assert messages(["--port", "8000"]) == [
        "no model: the first argument after 'vllm serve' is the model path"
    ]
    assert messages(["m", "--trust-remote-code", "yes"]) == [
        "unexpected argument 'yes': only the model is positional; is a --flag missing?"
    ]


def test_it_asks_for_long_options() -> None:
    assert messages(["m", "-tp", "8"]) == ["-tp: write the long --form of this option"]


def test_it_describes_flags() -> None:
    table = flag_table("0.33.0")
    assert table["--dtype"].choices[:2] == ("auto", "half")
    assert table["--enable-expert-parallel"].boolean_optional
    assert (
        table["--headless"].value_type == "bool-flag"
        and not table["--headless"].boolean_optional
    )
    assert table["--dry-run"].value_type == "any"
    assert "--dry-run" not in flag_table("0.23.0")

"""vllm bench serve on the head: the workload shape the broker may carry, the argv built
from it and from the head's own plan, the progress read from tqdm's bar."""

from __future__ import annotations

import pytest

from engine.bench_serve import bench_argv, progress_of, target_of
from engine.messages import MessageRefused, check_bench_gateway, check_bench_shape

SERVE = [
    "vllm", "serve", "/models/Qwen3.5-397B-A17B", "--host", "10.0.0.1",
    "--port", "8000", "--served-model-name", "qwen3.5",
]  # fmt: skip
SHAPE = {"input_len": 512, "output_len": 256, "num_prompts": 40, "max_concurrency": 8}


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_the_argv_is_vllms_own_flags_aimed_at_the_heads_own_api() -> None:
    argv = bench_argv(
        {**SHAPE, "goodput": {"ttft": 800.0, "tpot": 50.0}, "label": "round-3"},
        SERVE,
        "/var/lib/agent/bench",
        "r.json",
    )
    assert argv[:3] == ["vllm", "bench", "serve"]
    assert _value(argv, "--base-url") == "http://10.0.0.1:8000"
    assert _value(argv, "--model") == "qwen3.5"
    assert _value(argv, "--tokenizer") == "/models/Qwen3.5-397B-A17B"
    assert _value(argv, "--random-input-len") == "512"
    assert _value(argv, "--max-concurrency") == "8"
    assert "--ignore-eos" in argv and "--save-result" in argv
    assert argv[argv.index("--goodput") + 1 : argv.index("--goodput") + 3] == [
        "tpot:50",
        "ttft:800",
    ]
    assert "--request-rate" not in argv  # inf: vLLM's default, every request at once
    through = bench_argv(SHAPE, SERVE, "/d", "f.json", base_url="http://10.0.0.9:8000/")
    assert _value(through, "--base-url") == "http://10.0.0.9:8000"


def test_the_target_follows_vllms_defaults() -> None:
    assert target_of(["vllm", "serve", "/m"]) == ("http://127.0.0.1:8000", "/m", "/m")
    assert target_of(["vllm", "serve", "/m", "--host", "::1", "--port=9000"])[0] == (
        "http://[::1]:9000"
    )
    with pytest.raises(ValueError, match="start the cluster"):
        target_of([])


@pytest.mark.parametrize(
    ("shape", "field"),
    [
        ({**SHAPE, "argv": ["--x"]}, "unknown keys"),
        ({k: v for k, v in SHAPE.items() if k != "input_len"}, "input_len"),
        ({**SHAPE, "max_concurrency": 0}, "max_concurrency"),
        ({**SHAPE, "request_rate": float("nan")}, "request_rate"),
        ({**SHAPE, "goodput": {"latency": 5}}, "goodput"),
        ({**SHAPE, "label": "a\nExecStart=/bin/sh"}, "label"),
        ({**SHAPE, "num_prompts": True}, "num_prompts"),
    ],
)
def test_the_agent_refuses_a_shape_field_it_does_not_expect(
    shape: dict[str, object], field: str
) -> None:
    with pytest.raises(MessageRefused, match=field):
        check_bench_shape(shape)


@pytest.mark.parametrize(
    "gateway",
    [
        {"url": "http://10.0.0.9:8000/v1/../admin", "key": "avc-" + "x" * 40},
        {"url": "http://user@10.0.0.9:8000", "key": "avc-" + "x" * 40},
        {"url": "file:///etc/passwd", "key": "avc-" + "x" * 40},
        {"url": "http://10.0.0.9:8000", "key": "short"},
        {"url": "http://10.0.0.9:8000", "key": "avc-" + "x" * 40, "extra": 1},
    ],
)
def test_the_agent_refuses_a_gateway_that_is_not_just_a_base_url_and_a_key(
    gateway: dict[str, object],
) -> None:
    with pytest.raises(MessageRefused, match="gateway"):
        check_bench_gateway(gateway)


def test_a_good_gateway_passes() -> None:
    ok = {"url": "https://console.example:8443", "key": "avc-" + "A_b-" * 10}
    assert check_bench_gateway(ok) == ok


def test_progress_is_the_last_bar_in_a_chunk() -> None:
    chunk = "\r 33%|███       | 1/3 [000.3s]\r 66%|██████    | 2/3 [000.4s]"
    assert progress_of(chunk) == (2, 3)
    assert progress_of("Starting initial single prompt test run...") is None

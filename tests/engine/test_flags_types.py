"""Every listed `vllm serve` flag has an arity and type (engine/flaglists/types.json).

The types follow vLLM's own argparse setup (EngineArgs.add_cli_args / get_kwargs in
vllm/engine/arg_utils.py, FrontendArgs in vllm/entrypoints/openai/cli_args.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from engine import flags
from engine.flags import FLAGLISTS, SUPPORTED_VERSIONS, VALUE_TYPES, check_argv
from engine.sim.vllm import __main__ as sim_main
from engine.sim.vllm.cli import parse_serve_args


def messages(argv: list[str], version: str = "0.23.0") -> list[str]:
    return [problem.message for problem in check_argv(argv, version)]


def listed(version: str) -> set[str]:
    lines = (FLAGLISTS / f"vllm-{version}.txt").read_text(encoding="utf-8")
    return {line.strip() for line in lines.splitlines() if line.startswith("--")}


@pytest.fixture
def types_without(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[None]:
    data = json.loads((FLAGLISTS / "types.json").read_text(encoding="utf-8"))
    del data["flags"][request.param]
    monkeypatch.setattr(flags, "_types", lambda: data)
    flags._flag_table.cache_clear()
    yield
    flags._flag_table.cache_clear()


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_it_types_every_flag_of_both_lists(version: str) -> None:
    types = json.loads((FLAGLISTS / "types.json").read_text(encoding="utf-8"))
    untyped = sorted(listed(version) - set(types["flags"]))
    assert untyped == []
    for name in listed(version):
        spec = types["flags"][name]
        assert spec["type"] in VALUE_TYPES, name
        assert spec["type"] != "choice" or spec["choices"], name
        # a flag no vLLM source established must say so (and is listed in the report)
        assert (spec["type"] == "any") == ("unverified" in spec), name
        assert not spec.get("boolean_optional") or spec["type"] == "bool-flag", name


@pytest.mark.parametrize("types_without", ["--enable-dbo"], indirect=True)
@pytest.mark.usefixtures("types_without")
def test_it_refuses_to_load_a_list_with_an_untyped_flag() -> None:
    with pytest.raises(ValueError, match=r"no entry for --enable-dbo"):
        flags.flag_table("0.23.0")


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_it_accepts_a_switch_without_a_value(version: str) -> None:
    for switch in ("--enable-dbo", "--enable-eplb", "--enable-ep-weight-filter"):
        assert check_argv(["m", switch], version) == []
        assert check_argv(["m", "--no-" + switch[2:]], version) == []
    assert check_argv(["m", "--enable-dbo", "--port", "8000"], version) == []


def test_it_keeps_store_true_switches_without_a_no_form() -> None:
    assert check_argv(["m", "--data-parallel-multi-port-external-lb"], "0.23.0") == []
    assert messages(["m", "--no-disable-log-stats"])[0].startswith(
        "--no-disable-log-stats is not a vllm serve flag"
    )
    assert messages(["m", "--aggregate-engine-logging=1"]) == [
        "--aggregate-engine-logging is a switch and takes no value; drop '=1'"
    ]


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_it_refuses_a_bad_choice_naming_the_allowed_values(version: str) -> None:
    [message] = messages(["m", "--kv-cache-dtype", "bogus"], version)
    assert message.startswith("--kv-cache-dtype takes one of auto, bfloat16, ")
    assert "fp8_e4m3" in message and message.endswith("got 'bogus'")
    assert check_argv(["m", "--kv-cache-dtype", "fp8"], version) == []
    assert messages(["m", "--mamba-cache-mode=every"], version) == [
        "--mamba-cache-mode takes one of all, align, none, got 'every'"
    ]


def test_it_refuses_a_non_integer_for_an_int_flag() -> None:
    assert messages(["m", "--dbo-decode-token-threshold", "many"]) == [
        "--dbo-decode-token-threshold takes a whole number, got 'many'"
    ]
    assert messages(["m", "--dp-sync-interval", "1.5"], "0.33.0") == [
        "--dp-sync-interval takes a whole number, got '1.5'"
    ]
    assert messages(["m", "--kv-offloading-size", "lots"]) == [
        "--kv-offloading-size takes a number, got 'lots'"
    ]


def test_it_takes_human_readable_token_counts() -> None:
    ok = ["m", "--max-num-batched-tokens", "8k", "--kv-cache-memory-bytes", "20G"]
    assert check_argv(ok + ["--max-model-len", "auto"], "0.33.0") == []
    assert check_argv(["m", "--max-model-len", "25.6k"], "0.23.0") == []
    assert messages(["m", "--max-num-batched-tokens", "lots"]) == [
        "--max-num-batched-tokens takes a whole number such as 4096, 32k or 1M, "
        "got 'lots'"
    ]


def test_it_checks_every_value_of_a_multi_value_flag() -> None:
    assert check_argv(["m", "--cudagraph-capture-sizes", "1", "2", "4"], "0.23.0") == []
    assert messages(["m", "--cudagraph-capture-sizes", "1", "two"]) == [
        "--cudagraph-capture-sizes takes a whole number, got 'two'"
    ]
    assert check_argv(["m", "--api-key", "k1", "k2"], "0.33.0") == []


def test_it_lets_optional_value_and_unverified_flags_stand_alone() -> None:
    assert check_argv(["m", "--hf-token"], "0.23.0") == []
    assert check_argv(["m", "--hf-token", "hf_abc"], "0.23.0") == []
    # --dry-run's type was not established: a switch or one unchecked value
    assert flags.flag_table("0.33.0")["--dry-run"].unverified
    assert check_argv(["m", "--dry-run"], "0.33.0") == []
    assert check_argv(["m", "--dry-run", "yes", "--port", "8000"], "0.33.0") == []


def test_it_accepts_vllms_dotted_json_keys() -> None:
    argv = ["m", "--compilation-config.mode", "3", "--compilation-config.level=3"]
    assert check_argv(argv + ["--limit-mm-per-prompt.image", "2"], "0.23.0") == []
    assert messages(["m", "--tensor-parallel-size.x", "8"])[0].startswith(
        "--tensor-parallel-size.x is not a vllm serve flag"
    )


def test_it_checks_json_only_when_a_dict_or_string_flag_looks_like_json() -> None:
    assert check_argv(["m", "--hf-overrides", "pkg.module:fn"], "0.23.0") == []
    assert messages(["m", "--hf-overrides", "{rope: 1}"])[0].startswith(
        "--hf-overrides takes a JSON value"
    )


def test_it_keeps_the_removed_flag_messages() -> None:
    assert messages(["m", "--num-scheduler-steps", "8"]) == [
        "--num-scheduler-steps was removed before vLLM 0.23.0; "
        "drop it (multi-step scheduling is gone)"
    ]
    [message] = messages(["m", "--disable-log-requests"], "0.33.0")
    assert message.startswith(
        "--disable-log-requests was removed before vLLM 0.23.0; "
        "use --no-enable-log-requests instead"
    )


def test_it_lets_the_sim_parse_a_switch() -> None:
    args = parse_serve_args(
        ["/data/models/x", "--enable-dbo", "--max-num-batched-tokens", "8k"], "0.23.0"
    )
    assert args.model == "/data/models/x" and args.max_num_batched_tokens == 8000
    args = parse_serve_args(["m", "--max-model-len", "32K"], "0.33.0")
    assert args.max_model_len == 32768


def test_it_lets_the_sim_print_help_after_a_switch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        sim_main.main(["serve", "/data/models/x", "--enable-dbo", "--help"])
    assert exit_info.value.code == 0
    assert "--enable-dbo, --no-enable-dbo" in capsys.readouterr().out


def test_it_makes_the_sim_refuse_a_bad_choice_like_argparse(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_serve_args(["m", "--kv-cache-dtype", "bogus"], "0.23.0")
    assert exit_info.value.code == 2
    assert "argument --kv-cache-dtype: --kv-cache-dtype takes one of auto" in (
        capsys.readouterr().err
    )

"""`vllm serve` command line for the simulator: the target version's flags, by argparse.

Every flag of the version's list is accepted (engine.flags knows each flag's value
type);
the ones the simulator acts on land in :class:`ServeArgs`. An unknown flag exits 2 with
argparse's ``vllm serve: error: unrecognized arguments: --foo``, like the real CLI.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from engine import flags

DEFAULT_VERSION = "0.23.0"

# vLLM's short aliases (engine/arg_utils.py); the console itself always writes long
# forms
SHORT_ALIASES: dict[str, str] = {
    "--data-parallel-size": "-dp",
    "--data-parallel-size-local": "-dpl",
    "--data-parallel-start-rank": "-dpr",
    "--data-parallel-rank": "-dpn",
    "--data-parallel-address": "-dpa",
    "--data-parallel-rpc-port": "-dpp",
    "--data-parallel-backend": "-dpb",
    "--enable-expert-parallel": "-ep",
    "--api-server-count": "-asc",
    "--nnodes": "-n",
    "--node-rank": "-r",
    "--tensor-parallel-size": "-tp",
    "--pipeline-parallel-size": "-pp",
    "--quantization": "-q",
}


@dataclass(frozen=True)
class ServeArgs:
    """The part of a `vllm serve` command line the simulator acts on."""

    model: str
    version: str
    host: str | None = None
    port: int = 8000
    served_model_name: str = ""
    data_parallel_size: int = 1
    data_parallel_size_local: int | None = None
    data_parallel_start_rank: int = 0
    data_parallel_address: str = "127.0.0.1"
    data_parallel_rpc_port: int = 29550
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29501
    headless: bool = False
    api_server_count: int | None = None
    max_model_len: int = 32768
    max_num_seqs: int = 256
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float = 0.9
    enable_prefix_caching: bool = True
    enable_expert_parallel: bool = False
    dtype: str = "auto"
    quantization: str | None = None
    num_gpu_blocks_override: int | None = None
    # tokens per streamed event after the first (vLLM SchedulerConfig.stream_interval)
    stream_interval: int = 1
    # the API keys /v1/* requires; empty: no authentication (see server.authenticate)
    api_keys: tuple[str, ...] = ()

    @property
    def nnodes_mode(self) -> bool:
        """TP/PP across nodes (--nnodes), as opposed to DP across nodes."""
        return self.nnodes > 1

    @property
    def local_engines(self) -> int:
        """DP ranks this process hosts."""
        if self.nnodes_mode:
            return self.data_parallel_size if self.node_rank == 0 else 0
        return (
            self.data_parallel_size_local
            if self.data_parallel_size_local is not None
            else self.data_parallel_size
        )

    @property
    def rpc_address(self) -> tuple[str, int]:
        """Where the head binds and headless ranks connect (DP or --master-* port)."""
        if self.nnodes_mode:
            return self.master_addr, self.master_port
        return self.data_parallel_address, self.data_parallel_rpc_port

    @property
    def remote_ranks(self) -> list[int]:
        """Ranks the head waits for: DP ranks on other nodes, or node ranks 1..n-1."""
        if self.nnodes_mode:
            return list(range(1, self.nnodes))
        return list(range(self.local_engines, self.data_parallel_size))

    @property
    def my_ranks(self) -> list[int]:
        """Ranks this process announces when it joins (headless) or hosts (head)."""
        if self.nnodes_mode:
            return [self.node_rank]
        return list(
            range(
                self.data_parallel_start_rank,
                self.data_parallel_start_rank + self.local_engines,
            )
        )

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.model


def _human_int(value: str, default: int) -> int:
    """vLLM's human-readable integers: 32k (1000s), 32K (1024s), 25.6k, 1M, 1G.

    --max-model-len also takes "auto" / -1 (the model's own limit): ``default``.
    """
    v = value.strip()
    if v in ("auto", "-1"):
        return default
    for suffix, decimal, binary in (
        ("k", 1000, 1 << 10),
        ("m", 1000_000, 1 << 20),
        ("g", 1000_000_000, 1 << 30),
        ("t", 1000_000_000_000, 1 << 40),
    ):
        if v.endswith(suffix):
            return int(float(v[:-1]) * decimal)
        if v.endswith(suffix.upper()):
            return int(v[:-1]) * binary
    return int(v)


def sim_version() -> str:
    """The vLLM version the simulator impersonates (env SIM_VLLM_VERSION)."""
    return os.environ.get("SIM_VLLM_VERSION", DEFAULT_VERSION)


def build_parser(version: str) -> argparse.ArgumentParser:
    """An argparse parser accepting exactly ``version``'s `vllm serve` flags."""
    parser = argparse.ArgumentParser(
        prog="vllm serve",
        usage="vllm serve [model_tag] [options]",
        description="Start the vLLM OpenAI Compatible API server "
        f"(simulated vLLM {version}).",
        allow_abbrev=False,
    )
    parser.add_argument(
        "model_tag",
        nargs="?",
        help="The model tag or path to serve (need not exist here).",
    )
    for name, info in sorted(flags.flag_table(version).items()):
        names = [name] + ([SHORT_ALIASES[name]] if name in SHORT_ALIASES else [])
        dest = name[2:].replace("-", "_")
        if info.value_type == "bool-flag":
            action: type[argparse.Action] | str = (
                argparse.BooleanOptionalAction
                if info.boolean_optional
                else "store_true"
            )
            parser.add_argument(*names, dest=dest, action=action, default=None)
        elif info.value_type == "any":
            # type unverified: a switch or a valued flag; either form is accepted
            parser.add_argument(
                *names, dest=dest, nargs="?", const="True", default=None
            )
            parser.add_argument(
                "--no-" + name[2:], dest=dest, action="store_const", const="False"
            )
        elif info.optional_value:
            parser.add_argument(
                *names, dest=dest, nargs="?", const="True", default=None
            )
        elif info.multiple:
            parser.add_argument(*names, dest=dest, nargs="+", default=None)
        else:
            parser.add_argument(
                *names, dest=dest, default=None, metavar=info.value_type.upper()
            )
    return parser


def _without_json_keys(argv: list[str], version: str) -> list[str]:
    """argv less vLLM's dotted JSON keys (``--compilation-config.mode 3``).

    vLLM's parser folds them into their JSON flag; argparse has no such option, and
    the simulator acts on none of them (engine.flags still sees the full argv).
    """
    table = flags.flag_table(version)
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        flag, eq, _ = token.partition("=")
        base, dot, _ = flag.partition(".")
        info = table.get(base)
        if dot and info is not None and info.value_type in ("json", "json-or-str"):
            if not eq and i < len(argv) and not argv[i].startswith("--"):
                i += 1  # the key's value
            continue
        out.append(token)
    return out


def parse_serve_args(argv: list[str], version: str | None = None) -> ServeArgs:
    """Parse a `vllm serve` argv (no "vllm serve"); exits 2 like argparse on errors."""
    version = version or sim_version()
    parser = build_parser(version)
    ns = parser.parse_args(_without_json_keys(argv, version))
    if ns.model_tag is None:
        parser.error("the following arguments are required: model_tag")
    for problem in flags.check_argv(argv, version):
        # argparse already refused unknown flags; duplicates and short aliases are fine
        # for vLLM
        if problem.flag.startswith("--") and "more than once" not in problem.message:
            parser.error(f"argument {problem.flag}: {problem.message}")
    a = vars(ns)

    def opt_int(key: str) -> int | None:
        v = a.get(key)
        return None if v is None else int(v)

    def get(key: str, default: str) -> str:
        v = a.get(key)
        return default if v is None else str(v)

    served = a.get("served_model_name")
    return ServeArgs(
        model=str(ns.model_tag),
        version=version,
        host=a.get("host"),
        port=int(get("port", "8000")),
        served_model_name=str(served[0]) if served else "",
        data_parallel_size=int(get("data_parallel_size", "1")),
        data_parallel_size_local=opt_int("data_parallel_size_local"),
        data_parallel_start_rank=int(get("data_parallel_start_rank", "0")),
        data_parallel_address=get("data_parallel_address", "127.0.0.1"),
        data_parallel_rpc_port=int(get("data_parallel_rpc_port", "29550")),
        tensor_parallel_size=int(get("tensor_parallel_size", "1")),
        pipeline_parallel_size=int(get("pipeline_parallel_size", "1")),
        nnodes=int(get("nnodes", "1")),
        node_rank=int(get("node_rank", "0")),
        master_addr=get("master_addr", "127.0.0.1"),
        master_port=int(get("master_port", "29501")),
        headless=bool(a.get("headless")),
        api_server_count=opt_int("api_server_count"),
        max_model_len=_human_int(get("max_model_len", "32768"), 32768),
        max_num_seqs=int(get("max_num_seqs", "256")),
        max_num_batched_tokens=None
        if a.get("max_num_batched_tokens") is None
        else _human_int(str(a["max_num_batched_tokens"]), 8192),
        gpu_memory_utilization=float(get("gpu_memory_utilization", "0.9")),
        enable_prefix_caching=a.get("enable_prefix_caching") is not False,
        enable_expert_parallel=bool(a.get("enable_expert_parallel")),
        dtype=get("dtype", "auto"),
        quantization=a.get("quantization"),
        num_gpu_blocks_override=int(a["num_gpu_blocks_override"])
        if str(a.get("num_gpu_blocks_override") or "").isdigit()
        else None,
        stream_interval=_stream_interval(a.get("stream_interval"), parser),
        api_keys=api_keys(a.get("api_key")),
    )


def _stream_interval(value: str | None, parser: argparse.ArgumentParser) -> int:
    """--stream-interval: an int >= 1, default 1 (vllm/config/scheduler.py,
    ``stream_interval: int = Field(default=1, ge=1)``; vLLM refuses 0 at start-up)."""
    if value is None:
        return 1
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        parser.error(f"argument --stream-interval: {value!r} is not an integer >= 1")
    return n


def api_keys(from_flag: list[str] | None) -> tuple[str, ...]:
    """The keys vLLM's server requires: ``--api-key`` (one or more) or else VLLM_API_KEY.

    vLLM's build_app: ``if tokens := [key for key in (args.api_key or
    [envs.VLLM_API_KEY]) if key]: app.add_middleware(AuthenticationMiddleware, ...)``
    (vllm/entrypoints/openai/api_server.py; in later releases
    vllm/entrypoints/serve/middleware/register.py): the flag wins over the variable,
    empty keys are dropped, and no key at all means no authentication.
    """
    return tuple(k for k in (from_flag or [os.environ.get("VLLM_API_KEY", "")]) if k)

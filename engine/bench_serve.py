"""A benchmark run on the head node: vLLM's own ``vllm bench serve``, one sweep point at a time.

The load generator is vLLM's (vllm/benchmarks/serve.py, ``add_cli_args``; vllm-project/vllm
@009e6d4a): its figures are vLLM's by definition, its ``--save-result`` JSON is what
``engine.bench.parse_result`` reads, and it ships with the engine the node already runs,
so nothing is installed for it. The console sends only the workload *shape* (lengths,
prompts, concurrency, rate, burstiness, goodput SLOs, label, seed); where to send it
(``--base-url`` from the running plan's ``--port``), which model (``--served-model-name`` or
the model path) and the key (the plan's ``VLLM_API_KEY``, passed as ``OPENAI_API_KEY``,
which vLLM's request functions send as ``Authorization: Bearer``,
vllm/benchmarks/lib/endpoint_request_func.py) come from the plan this agent started,
so no URL, path or secret crosses the broker for a benchmark.

The shape's allowlist is ``engine.messages.check_bench_shape``. Pure Python, no Django.
"""

from __future__ import annotations

import re
from typing import Any

from engine.flags import argv_value

# tqdm's bar, as vllm bench serve prints it on stderr: " 37%|███▋      | 37/100 [00:05<…"
_TQDM = re.compile(r"\|\s*(\d+)/(\d+)\s*\[")


def target_of(serve_argv: list[str]) -> tuple[str, str, str]:
    """(base URL, model name, tokenizer) of the head this node serves, from its own
    ``vllm serve MODEL …`` argv (``--host``/``--port``): vLLM's defaults are every
    address, port 8000 and the model path as the served name
    (vllm/entrypoints/openai/cli_args.py). Raises ValueError when the node
    serves nothing."""
    if len(serve_argv) < 3 or serve_argv[1] != "serve":
        raise ValueError("this node runs no `vllm serve` (start the cluster first)")
    model = serve_argv[2]
    port = argv_value(serve_argv, "--port") or "8000"
    host = argv_value(serve_argv, "--host") or ""  # vLLM binds every address without it
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    served = argv_value(serve_argv, "--served-model-name") or model
    return f"http://{host}:{int(port)}", served, model


def bench_argv(
    shape: dict[str, Any],
    serve_argv: list[str],
    result_dir: str,
    filename: str,
    *,
    base_url: str | None = None,
) -> list[str]:
    """``vllm bench serve`` for one sweep point, every flag one of vLLM's own
    (vllm/benchmarks/serve.py add_cli_args, datasets.py add_dataset_parser).
    ``base_url``: through the console's gateway instead of straight to this head."""
    head_url, served, tokenizer = target_of(serve_argv)
    base_url = (base_url or head_url).rstrip("/")
    argv = [
        "vllm", "bench", "serve",
        "--backend", "vllm",  # /v1/completions, streamed
        "--base-url", base_url,
        "--endpoint", "/v1/completions",
        "--model", served,
        "--tokenizer", tokenizer,
        "--dataset-name", "random",
        "--random-input-len", str(shape["input_len"]),
        "--random-output-len", str(shape["output_len"]),
        "--num-prompts", str(shape["num_prompts"]),
        "--ignore-eos",  # every request generates exactly output_len tokens
        "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50,90,99",
        "--save-result",
        "--result-dir", result_dir,
        "--result-filename", filename,
    ]  # fmt: skip
    if shape.get("max_concurrency") is not None:
        argv += ["--max-concurrency", str(shape["max_concurrency"])]
    if shape.get("request_rate") is not None:
        argv += ["--request-rate", repr(float(shape["request_rate"]))]
        if shape.get("burstiness") is not None:
            argv += ["--burstiness", repr(float(shape["burstiness"]))]
    if shape.get("goodput"):
        argv += ["--goodput"] + [
            f"{k}:{float(v):g}" for k, v in sorted(shape["goodput"].items())
        ]
    if shape.get("seed") is not None:
        argv += ["--seed", str(shape["seed"])]
    if shape.get("label"):
        argv += ["--label", str(shape["label"])]
    return argv


def progress_of(text: str) -> tuple[int, int] | None:
    """The last (done, total) of tqdm's bar in a chunk of stderr, or None."""
    found = _TQDM.findall(text)
    if not found:
        return None
    done, total = found[-1]
    return int(done), int(total)

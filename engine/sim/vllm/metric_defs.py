"""What vLLM's engine metrics are: names, types, help texts, labels and bucket bounds.

Pure data taken from vLLM 0.33.0 ``vllm/v1/metrics/loggers.py`` and ``buckets.py``
(reference/vllm-facts.md §1), one :class:`MetricDef` per series in :data:`METRICS`.
Kept apart from :mod:`engine.sim.vllm.metrics`, which builds the live registry from it,
so a new vLLM version's series is a new table row, not new code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from prometheus_client import Counter, Gauge, Histogram

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
ITERATION_TOKENS_BUCKETS = (
    1,
    8,
    16,
    32,
    64,
    128,
    256,
    512,
    1024,
    2048,
    4096,
    8192,
    16384,
)
PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)
NUM_PREEMPTIONS_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
LABELS = ["model_name", "engine"]


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """1, 2, 5, 10, 20, 50, … up to ``max_value`` (vLLM ``build_1_2_5_buckets``)."""
    out: list[int] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exponent
            if v > max_value:
                return out
            out.append(v)
        exponent += 1


REQUEST_TOKENS: Literal["request_tokens"] = "request_tokens"


@dataclass(frozen=True)
class MetricDef:
    """One ``vllm:*`` series: the :class:`EngineMetrics` attribute it lands on and how to build it.

    Every series has the ``LABELS``; a gauge or counter may add ``extra`` labels. A
    histogram's ``buckets`` are bounds, or ``REQUEST_TOKENS`` for the 1-2-5 series up to
    ``max_model_len``. ``since`` is the first vLLM version that has the series (older
    versions leave the attribute ``None``).
    """

    attr: str
    kind: type[Gauge] | type[Counter] | type[Histogram]
    name: str
    doc: str
    extra: tuple[str, ...] = ()
    buckets: tuple[float, ...] | Literal["request_tokens"] = ()
    since: str | None = None


# Registration order is exposition order; keep it as vLLM's loggers.py declares them.
METRICS: tuple[MetricDef, ...] = (
    MetricDef(
        "running",
        Gauge,
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
    ),
    MetricDef(
        "waiting",
        Gauge,
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
    ),
    MetricDef(
        "waiting_by_reason",
        Gauge,
        "vllm:num_requests_waiting_by_reason",
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting "
        "for scheduling "
        "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV "
        "transfer, blocked "
        "status). Sum of all reasons equals vllm:num_requests_waiting.",
        ("reason",),
    ),
    MetricDef(
        "sleep_state",
        Gauge,
        "vllm:engine_sleep_state",
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means "
        "engine is awake; "
        "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep "
        "level 2.",
        ("sleep_state",),
    ),
    MetricDef(
        "kv_usage",
        Gauge,
        "vllm:kv_cache_usage_perc",
        "KV-cache usage. 1 means 100 percent usage.",
    ),
    MetricDef(
        "prefix_queries",
        Counter,
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
    ),
    MetricDef(
        "prefix_hits",
        Counter,
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
    ),
    MetricDef(
        "preemptions",
        Counter,
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
    ),
    MetricDef(
        "prompt_tokens",
        Counter,
        "vllm:prompt_tokens",
        "Number of prefill tokens processed.",
    ),
    MetricDef(
        "prompt_by_source",
        Counter,
        "vllm:prompt_tokens_by_source",
        "Number of prompt tokens by source.",
        ("source",),
    ),
    MetricDef(
        "prompt_cached",
        Counter,
        "vllm:prompt_tokens_cached",
        "Number of cached prompt tokens (local + external).",
    ),
    MetricDef(
        "generation_tokens",
        Counter,
        "vllm:generation_tokens",
        "Number of generation tokens processed.",
    ),
    MetricDef(
        "request_success",
        Counter,
        "vllm:request_success",
        "Count of successfully processed requests.",
        ("finished_reason",),
    ),
    MetricDef(
        "req_prompt_tokens",
        Histogram,
        "vllm:request_prompt_tokens",
        "Number of prefill tokens processed.",
        buckets=REQUEST_TOKENS,
    ),
    MetricDef(
        "req_gen_tokens",
        Histogram,
        "vllm:request_generation_tokens",
        "Number of generation tokens processed.",
        buckets=REQUEST_TOKENS,
    ),
    MetricDef(
        "iteration_tokens",
        Histogram,
        "vllm:iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        buckets=ITERATION_TOKENS_BUCKETS,
    ),
    MetricDef(
        "max_gen_tokens",
        Histogram,
        "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        buckets=REQUEST_TOKENS,
    ),
    MetricDef(
        "params_n",
        Histogram,
        "vllm:request_params_n",
        "Histogram of the n request parameter.",
        buckets=PARAMS_N_BUCKETS,
    ),
    MetricDef(
        "params_max_tokens",
        Histogram,
        "vllm:request_params_max_tokens",
        "Histogram of the max_tokens request parameter.",
        buckets=REQUEST_TOKENS,
    ),
    MetricDef(
        "ttft",
        Histogram,
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        buckets=TTFT_BUCKETS,
    ),
    MetricDef(
        "itl",
        Histogram,
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        buckets=ITL_BUCKETS,
    ),
    MetricDef(
        "tpot",
        Histogram,
        "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
        buckets=ITL_BUCKETS,
    ),
    MetricDef(
        "e2e",
        Histogram,
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        buckets=REQUEST_LATENCY_BUCKETS,
    ),
    MetricDef(
        "queue_time",
        Histogram,
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        buckets=REQUEST_LATENCY_BUCKETS,
    ),
    MetricDef(
        "inference_time",
        Histogram,
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        buckets=REQUEST_LATENCY_BUCKETS,
    ),
    MetricDef(
        "prefill_time",
        Histogram,
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        buckets=REQUEST_LATENCY_BUCKETS,
    ),
    MetricDef(
        "decode_time",
        Histogram,
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        buckets=REQUEST_LATENCY_BUCKETS,
    ),
    MetricDef(
        "prefill_kv_computed",
        Histogram,
        "vllm:request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        buckets=REQUEST_TOKENS,
    ),
    MetricDef(
        "req_num_preemptions",
        Histogram,
        "vllm:request_num_preemptions",
        "Histogram of number of preemptions per request.",
        buckets=NUM_PREEMPTIONS_BUCKETS,
        since="0.33.0",  # absent in 0.23.0 (reference/vllm-facts.md §1.2)
    ),
)

"""vLLM's engine metrics (names, types, labels, buckets) on a private registry.

Names and bucket bounds follow vLLM 0.33.0 ``vllm/v1/metrics/loggers.py`` and
``buckets.py`` (reference/vllm-facts.md §1); for 0.23.0 the series that version lacks
are left out. Every series carries ``model_name`` and ``engine`` (the DP rank).
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from engine.versions import version_key

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


def _newer(version: str, than: str) -> bool:
    return version_key(version) >= version_key(than)


class EngineMetrics:
    """All ``vllm:*`` series of one API server, one ``engine`` label per DP rank."""

    def __init__(
        self, *, model_name: str, engines: int, max_model_len: int, version: str
    ) -> None:
        self.registry = CollectorRegistry()
        self.model_name = model_name
        r = self.registry
        v33 = _newer(version, "0.33.0")
        req_tokens = build_1_2_5_buckets(max_model_len)

        def g(name: str, doc: str, extra: list[str] | None = None) -> Gauge:
            return Gauge(name, doc, LABELS + (extra or []), registry=r)

        def c(name: str, doc: str, extra: list[str] | None = None) -> Counter:
            return Counter(name, doc, LABELS + (extra or []), registry=r)

        def h(name: str, doc: str, buckets: tuple[float, ...] | list[int]) -> Histogram:
            return Histogram(
                name, doc, LABELS, buckets=[float(b) for b in buckets], registry=r
            )

        self.running = g(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
        )
        self.waiting = g(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed."
        )
        self.waiting_by_reason = g(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting "
            "for scheduling "
            "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV "
            "transfer, blocked "
            "status). Sum of all reasons equals vllm:num_requests_waiting.",
            ["reason"],
        )
        self.sleep_state = g(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means "
            "engine is awake; "
            "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep "
            "level 2.",
            ["sleep_state"],
        )
        self.kv_usage = g(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."
        )
        self.prefix_queries = c(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
        )
        self.prefix_hits = c(
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
        )
        self.preemptions = c(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine."
        )
        self.prompt_tokens = c(
            "vllm:prompt_tokens", "Number of prefill tokens processed."
        )
        self.prompt_by_source = c(
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            ["source"],
        )
        self.prompt_cached = c(
            "vllm:prompt_tokens_cached",
            "Number of cached prompt tokens (local + external).",
        )
        self.generation_tokens = c(
            "vllm:generation_tokens", "Number of generation tokens processed."
        )
        self.request_success = c(
            "vllm:request_success",
            "Count of successfully processed requests.",
            ["finished_reason"],
        )
        self.req_prompt_tokens = h(
            "vllm:request_prompt_tokens",
            "Number of prefill tokens processed.",
            req_tokens,
        )
        self.req_gen_tokens = h(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            req_tokens,
        )
        self.iteration_tokens = h(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            ITERATION_TOKENS_BUCKETS,
        )
        self.max_gen_tokens = h(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            req_tokens,
        )
        self.params_n = h(
            "vllm:request_params_n",
            "Histogram of the n request parameter.",
            PARAMS_N_BUCKETS,
        )
        self.params_max_tokens = h(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            req_tokens,
        )
        self.ttft = h(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS,
        )
        self.itl = h(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            ITL_BUCKETS,
        )
        self.tpot = h(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.e2e = h(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.queue_time = h(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.inference_time = h(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.prefill_time = h(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.decode_time = h(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.prefill_kv_computed = h(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached "
            "tokens).",
            req_tokens,
        )
        self.req_num_preemptions: Histogram | None = None
        if v33:  # absent in 0.23.0 (reference/vllm-facts.md §1.2)
            self.req_num_preemptions = h(
                "vllm:request_num_preemptions",
                "Histogram of number of preemptions per request.",
                NUM_PREEMPTIONS_BUCKETS,
            )
        # pre-create every engine's series, as vLLM does, so a fresh server shows zeros
        for e in range(engines):
            lab = self.labels(e)
            for gauge in (self.running, self.waiting, self.kv_usage):
                gauge.labels(*lab).set(0)
            for reason in ("capacity", "deferred"):
                self.waiting_by_reason.labels(*lab, reason).set(0)
            for state, val in (
                ("awake", 1),
                ("weights_offloaded", 0),
                ("discard_all", 0),
            ):
                self.sleep_state.labels(*lab, state).set(val)
            for ctr in (
                self.prefix_queries,
                self.prefix_hits,
                self.preemptions,
                self.prompt_tokens,
                self.prompt_cached,
                self.generation_tokens,
            ):
                ctr.labels(*lab)
            for source in ("local_compute", "local_cache_hit", "external_kv_transfer"):
                self.prompt_by_source.labels(*lab, source)
            for reason in FINISH_REASONS:
                self.request_success.labels(*lab, reason)
            for hist in self._histograms():
                hist.labels(*lab)

    def _histograms(self) -> list[Histogram]:
        hs = [
            self.req_prompt_tokens,
            self.req_gen_tokens,
            self.iteration_tokens,
            self.max_gen_tokens,
            self.params_n,
            self.params_max_tokens,
            self.ttft,
            self.itl,
            self.tpot,
            self.e2e,
            self.queue_time,
            self.inference_time,
            self.prefill_time,
            self.decode_time,
            self.prefill_kv_computed,
        ]
        if self.req_num_preemptions is not None:
            hs.append(self.req_num_preemptions)
        return hs

    def labels(self, engine: int) -> tuple[str, str]:
        """Label values (model_name, engine) for DP rank ``engine``."""
        return (self.model_name, str(engine))

    def exposition(self) -> bytes:
        """The Prometheus text exposition of this registry."""
        return generate_latest(self.registry)

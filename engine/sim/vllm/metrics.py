"""vLLM's engine metrics (names, types, labels, buckets) on a private registry.

Names and bucket bounds follow vLLM 0.33.0 ``vllm/v1/metrics/loggers.py`` and
``buckets.py`` (reference/vllm-facts.md §1); for 0.23.0 the series that version lacks
are left out. Every series carries ``model_name`` and ``engine`` (the DP rank).
The series are the table :data:`engine.sim.vllm.metric_defs.METRICS`; this module
registers them and pre-creates every engine's children.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from engine.sim.vllm.metric_defs import (
    FINISH_REASONS,
    ITERATION_TOKENS_BUCKETS,
    ITL_BUCKETS,
    LABELS,
    METRICS,
    NUM_PREEMPTIONS_BUCKETS,
    PARAMS_N_BUCKETS,
    REQUEST_LATENCY_BUCKETS,
    TTFT_BUCKETS,
    MetricDef,
    build_1_2_5_buckets,
)
from engine.versions import version_key

__all__ = [
    "FINISH_REASONS",
    "ITERATION_TOKENS_BUCKETS",
    "ITL_BUCKETS",
    "LABELS",
    "METRICS",
    "NUM_PREEMPTIONS_BUCKETS",
    "PARAMS_N_BUCKETS",
    "REQUEST_LATENCY_BUCKETS",
    "TTFT_BUCKETS",
    "EngineMetrics",
    "MetricDef",
    "build_1_2_5_buckets",
]


def _newer(version: str, than: str) -> bool:
    return version_key(version) >= version_key(than)


class EngineMetrics:
    """All ``vllm:*`` series of one API server, one ``engine`` label per DP rank.

    The series are built from :data:`METRICS`, one attribute per entry.
    """

    running: Gauge
    waiting: Gauge
    waiting_by_reason: Gauge
    sleep_state: Gauge
    kv_usage: Gauge
    prefix_queries: Counter
    prefix_hits: Counter
    preemptions: Counter
    prompt_tokens: Counter
    prompt_by_source: Counter
    prompt_cached: Counter
    generation_tokens: Counter
    request_success: Counter
    req_prompt_tokens: Histogram
    req_gen_tokens: Histogram
    iteration_tokens: Histogram
    max_gen_tokens: Histogram
    params_n: Histogram
    params_max_tokens: Histogram
    ttft: Histogram
    itl: Histogram
    tpot: Histogram
    e2e: Histogram
    queue_time: Histogram
    inference_time: Histogram
    prefill_time: Histogram
    decode_time: Histogram
    prefill_kv_computed: Histogram
    req_num_preemptions: Histogram | None

    def __init__(
        self, *, model_name: str, engines: int, max_model_len: int, version: str
    ) -> None:
        self.registry = CollectorRegistry()
        self.model_name = model_name
        req_tokens = build_1_2_5_buckets(max_model_len)
        for m in METRICS:
            present = m.since is None or _newer(version, m.since)
            setattr(self, m.attr, self._build(m, req_tokens) if present else None)
        # pre-create every engine's series, as vLLM does, so a fresh server shows zeros
        for e in range(engines):
            self._precreate(e)

    def _build(
        self, m: MetricDef, req_tokens: list[int]
    ) -> Gauge | Counter | Histogram:
        """Register the series ``m`` describes on this registry."""
        if m.kind is Histogram:
            # a str is REQUEST_TOKENS: bounds that follow max_model_len
            buckets = req_tokens if isinstance(m.buckets, str) else m.buckets
            return Histogram(
                m.name,
                m.doc,
                LABELS,
                buckets=[float(b) for b in buckets],
                registry=self.registry,
            )
        return m.kind(m.name, m.doc, LABELS + list(m.extra), registry=self.registry)

    def _precreate(self, e: int) -> None:
        """Create engine ``e``'s children with vLLM's start values (zeros, awake)."""
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

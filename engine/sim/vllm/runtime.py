"""The head's engine runtime: one :class:`EngineCore` per DP rank, stepped in real time.

Requests are spread round-robin over the DP ranks. Each rank's loop runs a step of the
pure latency model, sleeps its duration × ``SIM_TIME_SCALE`` and hands the emitted
tokens to the waiting HTTP handlers; metrics are recorded with real (wall) times, the
ones a client measures.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

from engine.sim.vllm import text
from engine.sim.vllm.logs import VllmLog
from engine.sim.vllm.metrics import EngineMetrics
from engine.sim.vllm.model import EngineCore, ModelParams, SimRequest


@dataclass
class Stream:
    """A request as the HTTP layer sees it: token indexes on ``queue``, then None."""

    request_id: str
    engine: int
    prompt_ids: list[int]
    completion: text.Completion
    max_tokens: int
    n: int = 1
    # vLLM's TTFT runs from the request's arrival_time to the step that made its
    # first token (vllm/v1/metrics/stats.py, IterationStats.update_from_output:
    # first_token_latency = iteration timestamp - req_stats.arrival_time)
    arrival: float = field(default_factory=time.monotonic)
    queue: asyncio.Queue[int | None] = field(default_factory=asyncio.Queue)
    token_times: list[float] = field(default_factory=list)
    scheduled_at: float | None = None
    finished: bool = False
    shutdown: bool = (
        False  # the engine stopped under it: the HTTP layer drops the connection
    )
    sim: SimRequest | None = None

    @property
    def output_len(self) -> int:
        return len(self.completion.tokens)


class LinkState:
    """What slows the group's steps: the worst HCCS loss, any node on RoCE."""

    def __init__(self) -> None:
        self.by_node: dict[str, tuple[str, float]] = {}
        self.garbled_nodes: set[str] = set()

    def set_garbled(self, node: str, garbled: bool) -> None:
        """Mark a node whose rank corrupts outputs (the ``garbled`` fault)."""
        if garbled:
            self.garbled_nodes.add(node)
        else:
            self.garbled_nodes.discard(node)

    @property
    def garbled(self) -> bool:
        # EP/DP ranks exchange activations every step: one corrupt rank spoils every answer
        return bool(self.garbled_nodes)

    def set(self, node: str, link_mode: str, loss_pct: float) -> None:
        self.by_node[node] = (link_mode, loss_pct)

    def drop(self, node: str) -> None:
        self.by_node.pop(node, None)
        self.garbled_nodes.discard(node)

    @property
    def link_mode(self) -> str:
        return "roce" if any(m == "roce" for m, _ in self.by_node.values()) else "hccs"

    @property
    def loss_pct(self) -> float:
        return max((loss for _, loss in self.by_node.values()), default=0.0)


class SimEngine:
    """All DP ranks' engine cores of one API server."""

    def __init__(
        self,
        *,
        params: ModelParams,
        engines: int,
        metrics: EngineMetrics,
        log: VllmLog,
        time_scale: float,
        links: LinkState,
    ) -> None:
        self.params = params
        self.cores = [EngineCore(params) for _ in range(engines)]
        self.metrics = metrics
        self.log = log
        self.time_scale = time_scale
        self.links = links
        self.streams: dict[str, Stream] = {}
        self._rr = itertools.cycle(range(engines))
        self._wake = [asyncio.Event() for _ in range(engines)]
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start one stepping loop per DP rank (call inside the running event loop)."""
        self._tasks = [
            asyncio.create_task(self._run(rank)) for rank in range(len(self.cores))
        ]

    async def stop(self) -> None:
        """Stop stepping and abort what is in flight, as vLLM does on SIGTERM.

        Every open stream is ended (its connection dropped, counted as an abort), so the
        HTTP server can shut down at once instead of waiting for clients to leave.
        """
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for request_id, stream in list(self.streams.items()):
            stream.shutdown = True
            self.abort(request_id)
            stream.queue.put_nowait(None)

    @property
    def in_flight(self) -> int:
        return len(self.streams)

    def load(self, rank: int) -> float:
        """Running batch / max_num_seqs of one rank (0..1)."""
        return min(
            1.0, len(self.cores[rank].running) / max(self.params.max_num_seqs, 1)
        )

    # ------------------------------------------------------------- requests
    def submit(
        self,
        request_id: str,
        prompt_ids: list[int],
        completion: text.Completion,
        *,
        max_tokens: int,
        n: int = 1,
    ) -> Stream:
        """Queue a request on the next DP rank; tokens arrive on the stream's queue."""
        rank = next(self._rr)
        stream = Stream(request_id, rank, prompt_ids, completion, max_tokens, n)
        self.streams[request_id] = stream
        # the engine always runs at least one step, even for an empty answer
        stream.sim = SimRequest(request_id, prompt_ids, max(1, stream.output_len))
        self.cores[rank].add(stream.sim)
        self._gauges(rank)
        self._wake[rank].set()
        return stream

    def abort(self, request_id: str) -> None:
        """Client went away: drop the request, count it as finished_reason="abort"."""
        stream = self.streams.pop(request_id, None)
        if stream is None or stream.finished:
            return
        stream.finished = True
        self.cores[stream.engine].abort(request_id)
        lab = self.metrics.labels(stream.engine)
        self.metrics.request_success.labels(*lab, "abort").inc()
        self._gauges(stream.engine)
        self.log.info("async_llm.py:549", f"Aborted request {request_id}.")

    # ------------------------------------------------------------- stepping
    async def _run(self, rank: int) -> None:
        core = self.cores[rank]
        # As vLLM's EngineCoreProc.run_busy_loop (vllm/v1/engine/core.py): an idle
        # core waits for input (_process_input_queue), then steps with whatever is
        # queued; a request arriving during a step waits for the next one.
        while True:
            if not core.has_work:
                self._wake[rank].clear()
                await self._wake[rank].wait()
                continue
            res = core.step(
                0.0, link_mode=self.links.link_mode, hccs_loss_pct=self.links.loss_pct
            )
            started = time.monotonic()
            for rid in res.admitted:
                st = self.streams.get(rid)
                if st is not None and st.scheduled_at is None:
                    st.scheduled_at = started
            await asyncio.sleep(res.seconds * self.time_scale)
            now = time.monotonic()
            m, lab = self.metrics, self.metrics.labels(rank)
            m.iteration_tokens.labels(*lab).observe(
                res.prefill_tokens + res.decode_seqs
            )
            m.prefix_queries.labels(*lab).inc(res.prefix_queries)
            m.prefix_hits.labels(*lab).inc(res.prefix_hits)
            if res.preempted:
                m.preemptions.labels(*lab).inc(len(res.preempted))
            for rid in res.emitted:
                st = self.streams.get(rid)
                if st is None:
                    continue
                index = len(st.token_times)
                st.token_times.append(now)
                if index == 0:
                    cached = st.sim.cached_tokens if st.sim is not None else 0
                    m.prompt_tokens.labels(*lab).inc(len(st.prompt_ids))
                    m.prompt_by_source.labels(*lab, "local_compute").inc(
                        len(st.prompt_ids) - cached
                    )
                    m.prompt_by_source.labels(*lab, "local_cache_hit").inc(cached)
                    m.prompt_cached.labels(*lab).inc(cached)
                    m.ttft.labels(*lab).observe(now - st.arrival)
                else:
                    m.itl.labels(*lab).observe(now - st.token_times[-2])
                if index < st.output_len:
                    m.generation_tokens.labels(*lab).inc()
                    st.queue.put_nowait(index)
            for rid in res.finished:
                st = self.streams.pop(rid, None)
                if st is not None:
                    self._finish(rank, st, now)
            self._gauges(rank)

    def _finish(self, rank: int, st: Stream, now: float) -> None:
        st.finished = True
        m, lab = self.metrics, self.metrics.labels(rank)
        scheduled = st.scheduled_at if st.scheduled_at is not None else st.arrival
        first = st.token_times[0] if st.token_times else now
        out = st.output_len
        m.request_success.labels(*lab, st.completion.finish_reason).inc()
        m.e2e.labels(*lab).observe(now - st.arrival)
        m.queue_time.labels(*lab).observe(scheduled - st.arrival)
        m.inference_time.labels(*lab).observe(now - scheduled)
        m.prefill_time.labels(*lab).observe(first - scheduled)
        m.decode_time.labels(*lab).observe(now - first)
        if out > 1:
            m.tpot.labels(*lab).observe((now - first) / (out - 1))
        m.req_prompt_tokens.labels(*lab).observe(len(st.prompt_ids))
        m.req_gen_tokens.labels(*lab).observe(out)
        m.max_gen_tokens.labels(*lab).observe(st.max_tokens)
        m.params_max_tokens.labels(*lab).observe(st.max_tokens)
        m.params_n.labels(*lab).observe(st.n)
        cached = st.sim.cached_tokens if st.sim is not None else 0
        m.prefill_kv_computed.labels(*lab).observe(len(st.prompt_ids) - cached)
        if m.req_num_preemptions is not None:
            m.req_num_preemptions.labels(*lab).observe(
                st.sim.num_preemptions if st.sim is not None else 0
            )
        st.queue.put_nowait(None)

    def _gauges(self, rank: int) -> None:
        core, m = self.cores[rank], self.metrics
        lab = m.labels(rank)
        m.running.labels(*lab).set(len(core.running))
        m.waiting.labels(*lab).set(len(core.waiting))
        m.waiting_by_reason.labels(*lab, "capacity").set(len(core.waiting))
        m.kv_usage.labels(*lab).set(core.kv_usage())

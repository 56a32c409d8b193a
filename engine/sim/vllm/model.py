"""Latency model of one simulated vLLM engine (one DP rank): pure, no clock, no I/O.

Continuous batching as in vLLM V1: each :meth:`EngineCore.step` admits waiting requests
up to ``max_num_seqs`` while KV blocks last, spends up to ``max_num_batched_tokens`` on
prefill (chunked), decodes one token for every running request whose prefill is done,
and preempts (recompute mode: back to the front of the queue, KV freed) the newest
request when the KV cache is full. The step's duration comes from :func:`step_seconds`;
the caller sleeps that long (scaled by ``SIM_TIME_SCALE``) and delivers the tokens.

Defaults are calibrated for Qwen3.5-397B-A17B on DP4 × TP8 Atlas 800T A2: at batch 8,
input 512, TTFT is a few hundred ms and a decode step ~60 ms (≈17 tok/s per sequence).
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelParams:
    """Knobs of the latency model (seconds are unscaled simulated seconds)."""

    prefill_tokens_per_s: float = 12_000.0
    step_overhead_s: float = 0.004  # scheduler + launch cost of every step
    decode_base_s: float = (
        0.035  # a decode step at batch 1 (MoE all-to-all + attention)
    )
    decode_per_seq_s: float = 0.003  # each extra running sequence
    roce_factor: float = 1.15  # intra-server collectives over RoCE instead of HCCS
    loss_stall_s_per_pct: float = (
        0.006  # retransmit stalls per percent of HCCS packet loss
    )
    block_size: int = 128
    num_gpu_blocks: int = 2048
    max_num_seqs: int = 16
    max_num_batched_tokens: int = 4096
    enable_prefix_caching: bool = True


def step_seconds(
    params: ModelParams,
    *,
    prefill_tokens: int,
    decode_seqs: int,
    link_mode: str = "hccs",
    hccs_loss_pct: float = 0.0,
) -> float:
    """Duration of one engine step (unscaled seconds); 0 when there is nothing to do.

    Bigger batches decode slower per step; RoCE is ``roce_factor`` slower than HCCS;
    HCCS loss adds retransmit stalls proportional to the loss percentage.
    """
    if prefill_tokens <= 0 and decode_seqs <= 0:
        return 0.0
    t = params.step_overhead_s + prefill_tokens / params.prefill_tokens_per_s
    if decode_seqs > 0:
        t += params.decode_base_s + params.decode_per_seq_s * decode_seqs
    if link_mode == "roce":
        t *= params.roce_factor
    if hccs_loss_pct > 0:
        t += params.loss_stall_s_per_pct * hccs_loss_pct
    return t


def block_hashes(token_ids: list[int], block_size: int) -> list[str]:
    """Chained hashes of the prompt's full blocks (each covers all blocks before it)."""
    out: list[str] = []
    prev = b""
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        h = hashlib.blake2b(prev, digest_size=16)
        h.update(",".join(map(str, token_ids[start : start + block_size])).encode())
        prev = h.digest()
        out.append(prev.hex())
    return out


@dataclass
class SimRequest:
    """One request inside an engine core; ``output_len`` is known up front."""

    request_id: str
    prompt_ids: list[int]
    output_len: int
    arrival: float = 0.0  # simulated time the request arrived
    # engine state
    num_computed: int = 0  # tokens (prompt + output) whose KV is in cache
    generated: int = 0
    cached_tokens: int = 0  # prefix-cache hit at the last admission
    num_preemptions: int = 0
    scheduled_at: float | None = None  # first admission (end of queue time)
    first_token_at: float | None = None
    finished_at: float | None = None
    aborted: bool = False
    token_times: list[float] = field(default_factory=list)

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids)

    @property
    def target_len(self) -> int:
        """Tokens that must be in KV before the next token can be decoded."""
        return self.prompt_len + self.generated

    @property
    def done(self) -> bool:
        return self.aborted or self.generated >= self.output_len


@dataclass
class StepResult:
    """What one step did: its duration and per-request events."""

    seconds: float
    prefill_tokens: int = 0
    decode_seqs: int = 0
    emitted: list[str] = field(default_factory=list)  # ids that got one new token
    finished: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    admitted: list[str] = field(default_factory=list)
    prefix_queries: int = 0  # tokens looked up in the prefix cache this step
    prefix_hits: int = 0


class EngineCore:
    """Scheduler state of one DP rank; drive it with :meth:`step`."""

    def __init__(self, params: ModelParams) -> None:
        self.params = params
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.requests: dict[str, SimRequest] = {}
        self.prefix_cache: dict[str, None] = {}  # insertion-ordered LRU of block hashes
        self.num_preemptions = 0

    # ------------------------------------------------------------- queue ops
    def add(self, req: SimRequest) -> None:
        """Queue a request (it waits until the next step admits it)."""
        self.requests[req.request_id] = req
        self.waiting.append(req)

    def abort(self, request_id: str) -> bool:
        """Drop a request wherever it is; True if it was still live."""
        req = self.requests.pop(request_id, None)
        if req is None:
            return False
        req.aborted = True
        if req in self.running:
            self.running.remove(req)
        if req in self.waiting:
            self.waiting.remove(req)
        return True

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # ------------------------------------------------------------- KV accounting
    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.params.block_size)

    def used_blocks(self) -> int:
        return sum(self._blocks(max(r.num_computed, 1)) for r in self.running)

    def kv_usage(self) -> float:
        """Fraction of KV blocks held by running requests (0..1)."""
        return min(1.0, self.used_blocks() / self.params.num_gpu_blocks)

    def _prefix_hit_tokens(self, req: SimRequest) -> tuple[int, list[str]]:
        hashes = block_hashes(req.prompt_ids, self.params.block_size)
        if not self.params.enable_prefix_caching:
            return 0, hashes
        hit = 0
        for h in hashes:
            if h not in self.prefix_cache:
                break
            hit += 1
        # never serve the whole prompt from cache: the last token is always recomputed
        hit_tokens = min(hit * self.params.block_size, max(req.prompt_len - 1, 0))
        return hit_tokens, hashes

    def _remember(self, hashes: list[str]) -> None:
        if not self.params.enable_prefix_caching:
            return
        for h in hashes:
            self.prefix_cache.pop(h, None)
            self.prefix_cache[h] = None
        while (
            len(self.prefix_cache) > self.params.num_gpu_blocks
        ):  # evict least recently used
            self.prefix_cache.pop(next(iter(self.prefix_cache)))

    # ------------------------------------------------------------- one step
    def step(
        self, now: float, *, link_mode: str = "hccs", hccs_loss_pct: float = 0.0
    ) -> StepResult:
        """Schedule and run one step starting at simulated time ``now``.

        Token timestamps and finish times are ``now + duration``.
        """
        res = StepResult(seconds=0.0)
        self._admit(now, res)
        self._preempt_for_kv(res)
        decoders = self._prefill(res)
        res.decode_seqs = sum(
            1 for r in decoders if r.generated > 0 or r.first_token_at is not None
        )
        res.seconds = step_seconds(
            self.params,
            prefill_tokens=res.prefill_tokens,
            decode_seqs=res.decode_seqs,
            link_mode=link_mode,
            hccs_loss_pct=hccs_loss_pct,
        )
        self._decode(decoders, now + res.seconds, res)
        self._retire_finished(res)
        return res

    def _admit(self, now: float, res: StepResult) -> None:
        """Admission: FCFS while a sequence slot and KV blocks for the prompt are free."""
        p = self.params
        while self.waiting and len(self.running) < p.max_num_seqs:
            req = self.waiting[0]
            need = self._blocks(req.target_len + 1)
            if self.used_blocks() + need > p.num_gpu_blocks and self.running:
                break
            self.waiting.popleft()
            hit, hashes = self._prefix_hit_tokens(req)
            res.prefix_queries += req.prompt_len
            res.prefix_hits += hit
            req.cached_tokens = hit
            req.num_computed = hit
            self._remember(hashes)
            if req.scheduled_at is None:
                req.scheduled_at = now
            self.running.append(req)
            res.admitted.append(req.request_id)

    def _preempt_for_kv(self, res: StepResult) -> None:
        """KV pressure: each decode grows a sequence; preempt the newest until it fits."""
        p = self.params
        while self.running:
            need = sum(
                self._blocks(max(r.target_len, r.num_computed) + 1)
                for r in self.running
            )
            if need <= p.num_gpu_blocks or len(self.running) == 1:
                break
            victim = self.running.pop()
            victim.num_computed = 0
            victim.num_preemptions += 1
            self.num_preemptions += 1
            self.waiting.appendleft(victim)
            res.preempted.append(victim.request_id)

    def _prefill(self, res: StepResult) -> list[SimRequest]:
        """Prefill (chunked, within the token budget); return the requests that decode."""
        budget = self.params.max_num_batched_tokens
        decoders: list[SimRequest] = []
        for req in self.running:
            missing = req.target_len - req.num_computed
            if missing > 0:
                chunk = min(missing, budget)
                budget -= chunk
                req.num_computed += chunk
                res.prefill_tokens += chunk
                if req.num_computed >= req.target_len:
                    decoders.append(req)  # the last prefill chunk samples a token too
            else:
                decoders.append(req)
        return decoders

    def _decode(self, decoders: list[SimRequest], end: float, res: StepResult) -> None:
        """Give every decoder one token stamped ``end``; mark the ones that are done."""
        for req in decoders:
            req.generated += 1
            req.num_computed = req.target_len  # the new token's KV is written next step
            if req.first_token_at is None:
                req.first_token_at = end
            req.token_times.append(end)
            res.emitted.append(req.request_id)
            if req.done:
                req.finished_at = end
                res.finished.append(req.request_id)

    def _retire_finished(self, res: StepResult) -> None:
        """Drop the requests that finished this step from the engine."""
        for rid in res.finished:
            req = self.requests.pop(rid)
            self.running.remove(req)

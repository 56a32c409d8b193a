"""A vLLM-compatible multi-node engine simulator.

Run it as ``python -m engine.sim.vllm serve MODEL [flags]``.

Same argv as ``vllm serve`` (flags checked against the version in ``SIM_VLLM_VERSION``),
the same HTTP API, metrics, multi-node start order and failure modes;
no weights, no NPUs.
Modules: cli (argv), node (process entry) with head, headless and process (their
lifecycles), cluster (rank rendezvous), server (routes) with api, parse, streams,
completions (OpenAI) and messages (Anthropic) (HTTP), runtime (engine loops), model
(pure latency model), metrics, text.
"""

from __future__ import annotations

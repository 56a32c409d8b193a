"""The API key a cluster's vLLM engine requires (vLLM's ``--api-key`` / ``VLLM_API_KEY``).

One seam for everything that talks to an engine's HTTP API: the gateway, the
playground, the operations' smoke test and warm-up, the failover traffic and the
benchmarks send ``Authorization: Bearer <key>`` (:func:`engine_headers`).

Where the key comes from (README, "Security model"):

- ``ENGINE_API_KEY`` (or ``ENGINE_API_KEY_FILE``): one key for every cluster, e.g.
  from a secret store; rotate it by changing it and restarting the clusters.
- otherwise a key per cluster derived from ``SECRET_KEY``: HMAC-SHA256 of the cluster's
  name, so no key is stored anywhere and each cluster's differs; a new SECRET_KEY
  gives new keys (restart the clusters).

The key reaches ``vllm serve`` as the ``VLLM_API_KEY`` environment variable of the
start message (never as ``--api-key``: argv is world-readable in /proc and is the
plan viewers see). On the node it lives only in the 0600 EnvironmentFile / plan.json.
vLLM reads it in build_app: ``args.api_key or [envs.VLLM_API_KEY]`` (vllm/entrypoints/
openai/api_server.py), and then guards only paths under ``/v1``; ``/health`` and
``/metrics`` stay open, so the scraper and the agent's health probe need no key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from django.conf import settings

ENV_NAME = "VLLM_API_KEY"  # the variable vLLM reads (vllm/envs.py)


def engine_api_key(cluster_name: str) -> str | None:
    """The bearer token for ``cluster_name``'s engine (never None once configured)."""
    configured = getattr(settings, "ENGINE_API_KEY", "") or ""
    if configured:
        return str(configured)
    mac = hmac.new(
        settings.SECRET_KEY.encode(),
        b"ascend-console engine api key\x00" + cluster_name.encode(),
        hashlib.sha256,
    ).digest()
    return "eng-" + base64.urlsafe_b64encode(mac).decode().rstrip("=")


def engine_headers(cluster_name: str) -> dict[str, str]:
    """HTTP headers for a request to ``cluster_name``'s engine API."""
    key = engine_api_key(cluster_name)
    return {"Authorization": f"Bearer {key}"} if key else {}


def with_engine_key(cluster_name: str, plan: dict[str, object]) -> dict[str, object]:
    """A NodePlan dict as sent to the agent: its env plus the engine's key (head only:
    headless ranks serve no API). The plan shown to viewers never holds it."""
    key = engine_api_key(cluster_name)
    if not key or plan.get("role") != "head":
        return plan
    env = dict(plan.get("env") or {})  # type: ignore[call-overload]
    env[ENV_NAME] = key
    return {**plan, "env": env}

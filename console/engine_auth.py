"""The API key a cluster's vLLM engine requires (vLLM's ``--api-key``).

One seam for everything that talks to an engine's HTTP API: the gateway, the
playground, the scraper and benchmarks send ``Authorization: Bearer <key>``
when this returns a key. Issue 15 fills in where the key comes from.
"""

from __future__ import annotations


def engine_api_key(cluster_name: str) -> str | None:
    """The bearer token for ``cluster_name``'s engine, or None while engines run open."""
    return None

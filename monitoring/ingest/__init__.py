"""Ingest one poll round: every node's agent sample and every cluster's /metrics, in one transaction.

Rows are bulk-created (a few statements per round, whatever the node count); node
states move by conditional UPDATEs; one ``telemetry.update`` per cluster is
published after commit. A sample or exposition that cannot be read is stored as a
``SampleError`` with its raw text and never stops the rest of the round.

Modules: ``sample`` (one node's answer and one scrape, parsed and checked; no
database), ``errors`` (the ``SampleError`` rows), ``rounds`` (reading, storing and
publishing a round), ``scrapes`` (the engines' /metrics) and ``staleness`` (nodes that
went silent).
"""

from monitoring.ingest.rounds import RoundSummary, ingest_round
from monitoring.ingest.sample import NodeResult, ScrapeResult, health_url
from monitoring.ingest.staleness import node_staleness_update

__all__ = [
    "NodeResult",
    "RoundSummary",
    "ScrapeResult",
    "health_url",
    "ingest_round",
    "node_staleness_update",
]

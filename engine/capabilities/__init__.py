"""What each Ascend server model can do about an HCCS link fault, and the remedies
that follow from it.

``servers`` holds the facts per server model, each with its source (the sources are
described there); ``remedies`` the ordered remedies built on them and which of those
automatic mode runs. Pure data and pure functions: no I/O, no Django.
"""

from engine.capabilities.remedies import (
    ESCALATE,
    REPLACE_WITH_SPARE,
    ROCE_FAILOVER,
    Remedy,
    automatic_remedies,
    next_remedy,
    remedies_for,
    remedy_statement,
)
from engine.capabilities.servers import (
    CAPABILITIES,
    HONOURED,
    IGNORED,
    NO,
    SERVER_MODEL_LABELS,
    SERVER_MODELS,
    SOURCES,
    UNKNOWN,
    UNKNOWN_MODEL,
    YES,
    ServerCapability,
    capability,
)

__all__ = [
    "CAPABILITIES",
    "ESCALATE",
    "HONOURED",
    "IGNORED",
    "NO",
    "REPLACE_WITH_SPARE",
    "ROCE_FAILOVER",
    "SERVER_MODELS",
    "SERVER_MODEL_LABELS",
    "SOURCES",
    "UNKNOWN",
    "UNKNOWN_MODEL",
    "YES",
    "Remedy",
    "ServerCapability",
    "automatic_remedies",
    "capability",
    "next_remedy",
    "remedies_for",
    "remedy_statement",
]

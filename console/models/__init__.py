"""Models of the operator app, split by sub-domain (STYLE §1)."""

from console.models.acceptance import BenchmarkRun, GatePolicy, GateRun
from console.models.audit import AuditEvent
from console.models.evidence import EvidenceBundle, EvidenceTrigger
from console.models.gateway import ApiKey, ApiKeyPolicy, ApiUsage
from console.models.inventory import (
    Cluster,
    ClusterState,
    LinkMode,
    Node,
    NodeRole,
    NodeState,
)
from console.models.operations import (
    Operation,
    OperationKind,
    OperationState,
    OperationStep,
    StepState,
)
from console.models.profiles import EngineProfile

__all__ = [
    "ApiKeyPolicy",
    "BenchmarkRun",
    "GatePolicy",
    "GateRun",
    "ApiKey",
    "ApiUsage",
    "EvidenceBundle",
    "EvidenceTrigger",
    "Operation",
    "OperationKind",
    "OperationState",
    "OperationStep",
    "StepState",
    "AuditEvent",
    "Cluster",
    "ClusterState",
    "EngineProfile",
    "LinkMode",
    "Node",
    "NodeRole",
    "NodeState",
]

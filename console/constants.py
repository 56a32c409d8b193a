"""Numbers the whole console agrees on (thresholds from the original field guide, ports, roles)."""

from __future__ import annotations

# Alert thresholds (DESIGN.md "Defaults the demo ships with").
NPU_TEMP_MAX_C = 85.0
HBM_USAGE_MAX_PCT = 92.0
HCCS_LOSS_MAX_PCT = 15.0
P99_LATENCY_MAX_MS = 800.0
TARGET_TOKENS_PER_S_PER_NPU = 12.0

# Roles, lowest first: each role includes the ones before it.
ROLE_VIEWER = "viewer"
ROLE_OPERATOR = "operator"
ROLE_ADMIN = "admin"
ROLES = (ROLE_VIEWER, ROLE_OPERATOR, ROLE_ADMIN)

# vLLM versions whose flag lists engine/ ships.
VLLM_VERSIONS = ("0.23.0", "0.33.0")

"""Launch plans: `vllm serve` argv and environment for every rank of a deployment.

Two layouts, both from the vLLM / vllm-ascend docs:
- "dp": the vllm-ascend multi-node "MP" recipe. Data parallel across nodes,
  tensor parallel inside a node, expert parallel for the MoE layers. Node 0 runs
  the API server and binds the DP handshake socket; the others run --headless.
- "tp_pp": tensor parallel inside a node, pipeline parallel across nodes with
  --nnodes/--node-rank/--master-addr (vLLM >= 0.11.1); --headless on ranks > 0.

Modules: ``specs`` (NodeSpec, ProfileSpec in; NodePlan, ClusterPlan out; PlanError),
``checks`` (what the inputs must pass, messages keyed by field), ``argv`` (one node's
argv and environment) and ``build`` (build_plan, which runs the checks and builders).
"""

from engine.plans.argv import LINK_ENV
from engine.plans.build import build_plan
from engine.plans.checks import LINK_PAIR_REASON, PLAN_ENV, PLAN_FLAGS, link_pair_errors
from engine.plans.specs import (
    MODES,
    ClusterPlan,
    NodePlan,
    NodeSpec,
    PlanError,
    ProfileSpec,
)

__all__ = [
    "LINK_ENV",
    "LINK_PAIR_REASON",
    "MODES",
    "PLAN_ENV",
    "PLAN_FLAGS",
    "ClusterPlan",
    "NodePlan",
    "NodeSpec",
    "PlanError",
    "ProfileSpec",
    "build_plan",
    "link_pair_errors",
]

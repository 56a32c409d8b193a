"""The English forms of what alert rules, the alert evaluator and remediation write.

These are CharFields (``AlertRule.name``, ``Alert.message``, ``AlertEvent.message``,
``Incident.summary``, ``Operation.reason``), stored in English and matched against the
forms below when read (console/opsmessages.py ``render``); a parameter that is itself
one of these forms is translated too. ``MonitoringConfig.ready()`` registers them.
Built-in rule names translate only when the name is still the seeded one: a name an
admin typed is shown as typed.
"""

from __future__ import annotations

from django.utils.translation import gettext_noop as _noop

# The seeded rules (monitoring/alerts/catalog.py DEFAULT_RULES, the gate rule):
# names only, each exact; zh-Hans in locale/zh_Hans/LC_MESSAGES/django.po.
RULE_NAMES: list[str] = [
    _noop("NPU temperature high"),
    _noop("NPU HBM usage high"),
    _noop("HCCS link loss"),
    _noop("NPU health not OK"),
    _noop("RoCE NIC down"),
    _noop("Node agent unreachable"),
    _noop("Engine process failed"),
    _noop("Engine health failing"),
    _noop("Engine stalled"),
    _noop("Gateway sees engine errors"),
    _noop("P99 TTFT over target"),
    _noop("P99 end-to-end latency over target"),
    _noop("Requests waiting"),
    _noop("KV cache pressure with preemptions"),
    _noop("Correctness gate failed"),
]
# tests/alerts/test_ops_language.py holds this list to DEFAULT_RULES and the gate rule.

# id → English form. Order matters: more specific forms first.
MESSAGES: dict[str, str] = {
    # monitoring/alerts/gate.py
    "alert.gate_failed": _noop(
        "correctness gate failed on {cluster}: {failed}/{total} samples ({ids}); {detail}"
    ),
    "alert.gate_passed": _noop("gate run #{run} passed"),
    # monitoring/alerts/evaluation.py, services.py, notify.py
    "alert.silenced_match": _noop("matched an active silence"),
    "alert.acknowledged": _noop("acknowledged by {user}"),
    "alert.not_firing": _noop("alert is {state}, not firing"),
    "alert.silenced_until": _noop("silenced until {until}: {comment}"),
    "alert.escalated": _noop("ESCALATED: {message}"),
    # monitoring/remediation/ (decide, preconditions, act, approval)
    "rem.joined": _noop("joined incident #{incident} ({action}, already {state})"),
    "rem.no_action": _noop("no action: {reason}"),
    "rem.next_remedy": _noop("{problem}: trying the next remedy"),
    "rem.waits": _noop("{action} waits for an operator's approval"),
    "rem.proposed": _noop("proposed: {what}; waiting for an operator to approve"),
    "rem.automatic": _noop("automatic: {what}"),
    "rem.approved": _noop("approved by {user}: {what}"),
    "rem.rejected": _noop("rejected by {user}"),
    "rem.describe_failover": _noop(
        "fail {node}'s intra-server link over to RoCE (rank-ordered restart)"
    ),
    "rem.describe_replace": _noop(
        "replace {node} with an idle spare (rank-ordered restart)"
    ),
    "rem.describe_restart": _noop("restart {cluster} in rank order"),
    "rem.describe_scale_out": _noop(
        "start the standby cluster and add it to the gateway pool"
    ),
    "rem.silenced": _noop("the alert is silenced"),
    "rem.no_action_rule": _noop("the rule has a policy but no action"),
    "rem.no_cluster": _noop("the alert belongs to no cluster"),
    "rem.maintenance": _noop(
        "{cluster} is in maintenance mode (automatic actions paused)"
    ),
    "rem.op_active": _noop("operation #{op} ({kind}) is active on {cluster}"),
    "rem.cooldown": _noop(
        "cooldown: incident #{incident} acted at {at} (cooldown {cooldown} s)"
    ),
    "rem.rate_limit": _noop(
        "{count} automatic actions on {cluster} in the last hour (limit {limit})"
    ),
    "rem.not_serving": _noop("{cluster} is {state}, not serving"),
    "rem.failover_node_scoped": _noop("failover needs a node-scoped alert"),
    "rem.replace_node_scoped": _noop("replacement needs a node-scoped alert"),
    "rem.already_roce": _noop(
        "{node} already runs on RoCE and still loses packets: moving to the second remedy"
    ),
    "rem.roce_unhealthy": _noop(
        "{node} loses HCCS packets but its RoCE ports are not healthy ({ports}): no failover restart"
    ),
    "rem.no_spare": _noop(
        "no idle spare with {count} × {model} ({hbm} GB) to replace {node}"
    ),
    "rem.restarts_exhausted": _noop(
        "{count} automatic restarts of {cluster} failed in the last {window} s: not trying again"
    ),
    "rem.no_standby": _noop("no stopped standby cluster serves {model}"),
    "rem.incident_reason": _noop("incident #{incident}: {message}"),
    "rem.op_started": _noop("operation #{op} ({kind} on {target}) started"),
    "rem.could_not_start": _noop("could not start {kind} on {target}: {error}"),
    "rem.operation": _noop("operation #{op}: {kind} on {target}"),
    # monitoring/remediation/outcomes.py
    "rem.cancelled_summary": _noop(
        "operation #{op} was cancelled by {who}; no further automatic action"
    ),
    "rem.cancelled": _noop(
        "operation #{op} was cancelled by {who}: automation stands down for this incident"
    ),
    "rem.interrupted": _noop(
        "operation #{op} ({kind}) was interrupted: {error}; check the control worker "
        "and the cluster, then act by hand"
    ),
    "rem.switch_unverifiable": _noop(
        "the switch to RoCE cannot be verified on {node} ({status}): {detail} Moving to "
        "the next remedy."
    ),
    "rem.switch_failed": _noop(
        "the switch to RoCE did not take effect on {node} ({status}): {detail} Moving "
        "to the next remedy."
    ),
    "rem.verified": _noop("verified ({status}): {detail}"),
    "rem.succeeded_summary": _noop("operation #{op} succeeded; engine healthy"),
    "rem.recovered_mttr": _noop(
        "operation #{op} succeeded: engine healthy again; time to recovery {mttr} s"
    ),
    "rem.recovered": _noop("operation #{op} succeeded: engine healthy again"),
    "rem.replaced_out": _noop("{node} was replaced by {spare} and is out of service"),
    "rem.restarts_failed": _noop("{count} restarts failed; last: {what}"),
    "rem.retry_attempt": _noop(
        "{what}; attempt {attempt} of {max} in {delay} s (backoff)"
    ),
    "rem.retrying": _noop("{what}; retrying in {delay} s"),
    "rem.moving_on": _noop("{what}; moving to the next remedy"),
    "rem.op_failed": _noop("operation #{op} ({kind}) {state}: {error}"),
    "rem.no_next_remedy": _noop("no next remedy for a cluster-wide alert"),
    "rem.maintenance_backoff": _noop("maintenance mode switched on during the backoff"),
    "rem.no_retry_maintenance": _noop("no retry: {cluster} is in maintenance mode"),
    "rem.lapsed_summary": _noop("the alert resolved before anyone approved"),
    "rem.lapsed": _noop("the alert resolved before anyone approved the action"),
    "rem.resolved_mttr": _noop("alert resolved; time to recovery {mttr} s"),
    "rem.resolved": _noop("alert resolved"),
    # console/services/node_actions.py (operation reasons, link-mode reasons)
    "op.failback_reason": _noop("fail back to HCCS: {nodes}"),
    "op.readmitted": _noop("re-admitted by {user} after a passing preflight"),
    "op.replaced_by": _noop("replaced by {spare} (operation #{op})"),
    # engine/link_verify.py verify_link_switch (the failover verification's detail)
    "verify.hccs_bw": _noop(
        "HCCS still carries {bw} GB/s after the change (npu-smi info -t hccs-bw); the "
        "per-link packet counters were not available."
    ),
    "verify.cannot_unsupported": _noop(
        "Cannot verify the switch: npu-smi info -t hccs is unsupported on this node "
        "(driver or chip). This is not a pass; take the next remedy or escalate."
    ),
    "verify.cannot_empty": _noop(
        "Cannot verify the switch: the node's HCCS counters are empty or the links "
        "differ between samples. This is not a pass; take the next remedy or escalate."
    ),
    "verify.no_baseline": _noop(
        "Cannot verify the switch: no traffic on the node's HCCS links before the "
        "change ({pps} packets/s), so there is no baseline to compare with."
    ),
    "verify.idle": _noop(
        "Cannot verify the switch: no traffic after the change on this node or its "
        "peers, so idle HCCS links prove nothing."
    ),
    "verify.switched": _noop(
        "HCCS traffic fell to {share} % of the node's own baseline ({now} of {base} "
        "packets/s) while traffic continued."
    ),
    "verify.not_switched": _noop(
        "HCCS still carries {share} % of the node's baseline ({now} of {base} "
        "packets/s): the hardware did not move intra-server traffic to RoCE."
    ),
}
# Each seeded rule's name, alone and at the head of its alert message
# ("NPU temperature high: ascend-01/0 chip.temp_c=91 (> 85)").
for _i, _name in enumerate(RULE_NAMES):
    MESSAGES[f"rule.{_i}.message"] = _name + ": {detail}"
    MESSAGES[f"rule.{_i}"] = _name

# engine/capabilities/remedies.py remedies_for and monitoring/remediation/links.py: the sentences a
# remedy's "why" is made of (the doc citations in SOURCES stay as they are).
SENTENCES: dict[str, str] = {
    "why.a2_one_module": _noop(
        "HCCL ignores HCCL_INTRA_ROCE_ENABLE on this server: the HCCL env-var doc supports "
        "it on Atlas A2 only for the Atlas 200T A2 Box16, and HCCL's channel code keeps a "
        "server with one HCCS module on HCCS (isA2UsedRdma needs isDiffDeviceModule)."
    ),
    "why.a3": _noop(
        "On Atlas 800T/800I A3 the switch only affects LLM-DataDist traffic; the HCCL env-var "
        "doc says HCCL communication is not affected (HCCL通信不受影响)."
    ),
    "why.box16": _noop(
        "The HCCL env-var doc names the Atlas 200T A2 Box16 as the A2 server where "
        "HCCL_INTRA_ROCE_ENABLE is supported, and HCCL's channel code moves a "
        "two-module server's intra-server traffic to RDMA when the switch is on."
    ),
    "why.300t_pro": _noop(
        "The HCCL env-var doc names the Atlas 300T Pro training card as the Atlas "
        "training product where HCCL_INTRA_ROCE_ENABLE is supported."
    ),
    "why.unknown_model": _noop(
        "The server model is not known, and whether HCCL honours "
        "HCCL_INTRA_ROCE_ENABLE depends on it (only the Atlas 200T A2 Box16 and "
        "the Atlas 300T Pro per the HCCL env-var doc). Set the node's server model "
        "(detected at preflight, or a site override) to enable the RoCE failover."
    ),
    "why.every_rank": _noop(
        "The same HCCL_INTRA_PCIE_ENABLE=0 / HCCL_INTRA_ROCE_ENABLE=1 pair is applied "
        "to every rank of the engine (vllm-ascend reads the pair in every rank to pick "
        "the MoE dispatch/combine arguments)."
    ),
    "why.no_counters": _noop(
        "This node's HCCS counters are unsupported, so the switch cannot be "
        "verified; the verdict will be 'cannot verify' and the next remedy follows."
    ),
    "why.cann": _noop("(this node runs CANN {cann})"),
    "why.spare": _noop(
        "Drain this node and start the engine with an idle {label} spare in its "
        "rank: the faulty HCCS module leaves the engine, whatever HCCL does with the "
        "switch. The spare must be the same server model, so the engine's ranks keep "
        "one link layout."
    ),
    "why.spare_unknown": _noop(
        "The server model is unknown, so 'same model' cannot be checked."
    ),
    "why.no_spare": _noop(
        "No idle spare of the same server model ({label}) is available."
    ),
    "why.escalate": _noop(
        "Raise the alert to an operator with the evidence (per-link HCCS counters, "
        "loss rate) and the options above; nothing restarts."
    ),
    # engine/capabilities/remedies.py remedy_statement and links.py: the frame around each "why"
    "frame.server_model": _noop("Server model: {label}."),
    "frame.can_yes": _noop("— can work here: yes;"),
    "frame.can_no": _noop("— can work here: no;"),
    "frame.can_unknown": _noop("— can work here: unknown;"),
    "frame.not_run_yes": _noop("(can work here: yes"),
    "frame.not_run_no": _noop("(can work here: no"),
    "frame.not_run_unknown": _noop("(can work here: unknown"),
    "frame.source": _noop("; source: "),
    "frame.not_run": _noop("Not run: "),
    "frame.downtime": _noop("expected downtime ~{s} s (last measured start)."),
    "frame.downtime_unknown": _noop("expected downtime unknown (no measured start)."),
    "frame.no_restart": _noop("no restart."),
    "frame.none_left": _noop("no remedy that can have an effect is left"),
    "frame.options": _noop("Options: "),
    "why.other_ranks": _noop(
        "The RoCE pair is applied to every rank of the engine, and HCCL ignores it on {nodes}."
    ),
}

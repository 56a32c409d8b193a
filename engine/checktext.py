"""The English forms of every preflight check, keyed by a stable id.

A check is stored with its English text (for logs and the CLI) *and* its id and named
parameters, so the console can show name, evidence and fix in the reader's language
(console/opsmessages.py reads these forms as msgids). Parameters are raw tool output,
paths or numbers and are never translated; the sentence around them is.

A list written deeper (the release-matrix mismatches, the server-model evidence, the
model-file problems, ping loss) is a parameter made of *items*: ``item(id, **params)``
for one, ``join([...], "; ")`` for several. The English text joins their English forms
(ITEMS); the check keeps them under ``"parts"`` so the console renders each in the
reader's language (console/opsmessages.py registers ITEMS as messages).
"""

from __future__ import annotations

from typing import Any

# id → (name, evidence, fix). Ids are "<check>.<outcome>"; forms take {named} parameters.
CHECKS: dict[str, tuple[str, str, str]] = {
    # engine/preflight/
    "npu_smi.unavailable": (
        "npu-smi",
        "{problem}",
        "Install/repair the Ascend driver so `npu-smi info` works.",
    ),
    "npu_smi.unparsed": (
        "npu-smi",
        "{problem}",
        "Paste the output into `python -m engine.parsers npu-smi-info -` and report it.",
    ),
    "npu_health.ok": ("npu health", "{count} chips OK", ""),
    "npu_health.bad": (
        "npu health",
        "{problems}",
        "Check `npu-smi info -t health -i N` for the error code; replace or reset the NPU.",
    ),
    "npu_count.ok": ("npu count", "{count} NPUs", ""),
    "npu_count.bad": (
        "npu count",
        "{count} NPUs found, inventory says {expected}",
        "Fix the node's NPU count in the inventory or find the missing NPU (npu-smi info -l).",
    ),
    "hbm_free.ok": ("hbm free", "HBM free on every NPU", ""),
    "hbm_free.busy": (
        "hbm free",
        "HBM in use: {busy}",
        "Stop the process holding the NPUs (an old vLLM?) before starting.",
    ),
    "hbm_free.busy_pids": (
        "hbm free",
        "HBM in use: {busy} (pids {pids})",
        "Stop the process holding the NPUs (an old vLLM?) before starting.",
    ),
    "hccn_link.ok": ("hccn link", "all {count} NPU NICs", ""),
    "hccn_link.bad": (
        "hccn link",
        "{problems}",
        "Check the optical module and cable of that NPU port; `hccn_tool -i N -link_stat -g` shows flaps.",
    ),
    "hccn_net_health.ok": ("hccn net_health", "all {count} NPU NICs", ""),
    "hccn_net_health.bad": (
        "hccn net_health",
        "{problems}",
        "Run `hccn_tool -i N -net_health -g`; check the detect IP (-netdetect) and the switch port.",
    ),
    "hccn_lldp.ok": ("hccn lldp", "all {count} NPU NICs", ""),
    "hccn_lldp.bad": (
        "hccn lldp",
        "{problems}",
        "No LLDP neighbour: the NPU port is not cabled to the switch or LLDP is off on it.",
    ),
    "hccn_netdetect.ok": ("hccn netdetect", "all {count} NPU NICs", ""),
    "hccn_netdetect.bad": (
        "hccn netdetect",
        "{problems}",
        "Set a detect IP: `hccn_tool -i N -netdetect -s address <gateway>`.",
    ),
    "hccn_gateway.ok": ("hccn gateway", "all {count} NPU NICs", ""),
    "hccn_gateway.bad": (
        "hccn gateway",
        "{problems}",
        "Set the gateway: `hccn_tool -i N -gateway -s gateway <ip>`.",
    ),
    "hccn_conf.ok": ("hccn.conf", "{path} present", ""),
    "hccn_conf.missing": (
        "hccn.conf",
        "{path} missing",
        "Configure the NPU NICs with hccn_tool (-ip -s …); it writes /etc/hccn.conf.",
    ),
    "npu_ips.ok": ("npu ips", "{ips}", ""),
    "npu_ips.missing": (
        "npu ips",
        "no IP on NPU {npus}",
        "Set one with `hccn_tool -i N -ip -s address <ip> netmask <mask>`.",
    ),
    "npu_ping.ok": ("npu ping", "{count} peer NPU IPs answer", ""),
    "npu_ping.lost": (
        "npu ping",
        "{problems}",
        "Check the RoCE path to the head node's NPUs (switch, VLAN, -link, -net_health on both ends).",
    ),
    "model_path.none": (
        "model path",
        "no model path to check (the node serves no cluster yet)",
        "The path is checked again when the node joins a cluster.",
    ),
    "model_path.relative": (
        "model path",
        "{path} is not an absolute path",
        "Put the model under the agent's AGENT_MODELS_ROOT (same path on every node) "
        "or point AGENT_MODELS_ROOT at the directory that holds the models.",
    ),
    "model_path.outside": (
        "model path",
        "{path} is not a directory under the models root {root}",
        "Put the model under the agent's AGENT_MODELS_ROOT (same path on every node) "
        "or point AGENT_MODELS_ROOT at the directory that holds the models.",
    ),
    "ports_free.ok": ("ports free", "{ports}", ""),
    "ports_free.busy": (
        "ports free",
        "{ports}",
        "Stop what listens there (ss -ltnp) or change the node's API/RPC port.",
    ),
    "server_model.unknown": (
        "server model",
        "{label}: {evidence} (read from {source})",
        "Set the node's server model on its page (site override, with a "
        "reason); until then no RoCE failover runs automatically.",
    ),
    "server_model.ok": ("server model", "{label}: {evidence} (from {source})", ""),
    # engine/weights.py
    "model_files.missing": (
        "model files",
        "{path} does not exist",
        "Copy the complete model (config.json, the index and every shard) "
        "to the same path on every node.",
    ),
    "model_files.bad": (
        "model files",
        "{path}: {problems}",
        "Copy the complete model (config.json, the index and every shard) "
        "to the same path on every node.",
    ),
    "model_files.ok": (
        "model files",
        "{path}: {files} files, {bytes} bytes, {shards} shards as the index lists, "
        "config.json parsed",
        "",
    ),
    # engine/compat.py
    "release_matrix.none": (
        "release matrix",
        "no vllm-ascend installed and no target version given",
        "Set the profile's vllm-ascend version, or install vllm-ascend on the node.",
    ),
    "release_matrix.wrong": (
        "release matrix",
        "{problems}",
        "Install the versions of the vllm-ascend {target} row (CANN {cann}, torch_npu "
        "{torch_npu}), or run its image {image_a2} / {image_a3}.",
    ),
    "release_matrix.unknown": (
        "release matrix",
        "vllm-ascend {target} is not in the release matrix ({commit}); known: {known}, …",
        "Choose a vllm-ascend version the matrix knows.",
    ),
    "release_matrix.ok": (
        "release matrix",
        "vllm-ascend {target}: CANN {cann}, torch_npu {torch_npu}, vLLM {vllm} as the matrix says",
        "",
    ),
    # engine/drivers/container/driver.py
    "container_engine.down": (
        "container engine",
        "{problem}",
        "Start the {engine} service (systemctl start {engine}).",
    ),
    "container_engine.ok": ("container engine", "{engine} {version}", ""),
    "container_image.missing": (
        "container image",
        "{image}: {problem}",
        "{engine} pull {image} (or load it from the site's registry).",
    ),
    "container_image.ok": ("container image", "{image}: {label}={have}", ""),
    "container_image.unlabelled": (
        "container image",
        "{image}: {label}=absent, expected {want}",
        "Use the image of vllm-ascend {want}.",
    ),
    "container_image.wrong": (
        "container image",
        "{image}: {label}={have}, expected {want}",
        "Use the image of vllm-ascend {want}.",
    ),
    "container_image.no_release": (
        "container image",
        "vllm-ascend {version} has no image in the release matrix",
        "Set the profile's vllm-ascend version to a release of the matrix.",
    ),
    "npu_devices_free.ok": (
        "npu devices free",
        "no other container holds {devices}",
        "",
    ),
    "npu_devices_free.busy": (
        "npu devices free",
        "{holders}",
        "Stop the other container ({engine} stop NAME) or give this rank other NPUs.",
    ),
}


# id → the English form of one item of a detail list, {named} parameters; a parameter
# may itself be an item. Ids start with "item.".
ITEMS: dict[str, str] = {
    # engine/compat.py mismatches
    "item.release_needs": "{key} {have} (vllm-ascend {release} needs {want})",
    "item.release_belongs": "{mismatch}; {have} belongs to vllm-ascend {others}",
    "item.not_found": "not found",
    # engine/parsers/server_model.py detect_server_model
    "item.smbios_found": "SMBIOS product name {product}; {chip}.",
    "item.smbios_unknown": (
        "SMBIOS product name {product} names no known Atlas server; {chip}. "
        "Set a site override with the model and a reason."
    ),
    "item.smbios_disagrees": (
        "SMBIOS product name {product} says {label} ({model_chip}) but npu-smi "
        "reports {chip}; not trusted. Set a site override with a reason."
    ),
    "item.no_product_name": "no product name",
    "item.chip": "chip {chip} ({family})",
    "item.family_unknown": "family unknown",
    # engine/weights.py manifest and compare
    "item.path_missing": "{path} does not exist",
    "item.no_config": "no config.json",
    "item.config_unreadable": "config.json unreadable: {error}",
    "item.index_unreadable": "{index} unreadable: {error}",
    "item.shards_missing": "{index} names {count} missing shard(s): {shards}",
    "item.no_weights": "no *.safetensors weights",
    "item.file_sha256": "{file}: sha256 {digest}… here, {usual}… on most nodes",
    "item.file_missing": "{file}: missing here ({size} bytes on most nodes)",
    "item.file_only_here": "{file}: only here ({size} bytes)",
    "item.file_size": "{file}: {size} bytes here, {common} bytes on most nodes",
    "item.and_more": "and {count} more",
    "item.profile_says": "{key}: profile says {declared}, config.json says {found}",
    # engine/preflight/nics.py _ping_check (hccn_tool -ping)
    "item.ping_lost": "{target}: {sent} sent, 0 received",
    "item.target_problem": "{target}: {problem}",
}


def item(iid: str, **params: Any) -> dict[str, Any]:
    """One item of a detail list; KeyError for an unknown id."""
    ITEMS[iid]  # noqa: B018 - a typo must not ship as a silent English string
    return {"id": iid, "params": params}


def join(items: list[Any], sep: str = "; ") -> dict[str, Any]:
    """Several items (or plain strings) shown one after the other, ``sep`` between."""
    return {"join": sep, "items": list(items)}


def structured(value: Any) -> bool:
    return isinstance(value, dict) and ("join" in value or "id" in value)


def text(value: Any, forms: dict[str, str] | None = None) -> str:
    """The English of an item, a join or a plain value (for logs, the CLI, the stored text)."""
    forms = ITEMS if forms is None else forms
    if isinstance(value, dict) and "join" in value:
        return str(value["join"]).join(text(v, forms) for v in value.get("items") or [])
    if isinstance(value, dict) and value.get("id") in forms:
        params = {k: text(v, forms) for k, v in (value.get("params") or {}).items()}
        return forms[value["id"]].format(**params)
    return "" if value is None else str(value)


def check(
    cid: str,
    status: str,
    table: dict[str, tuple[str, str, str]] | None = None,
    **params: Any,
) -> dict[str, Any]:
    """A check dict: the English name/evidence/fix of ``cid`` (in ``table``, default
    CHECKS) filled with ``params``, and the id and params themselves (for the console
    to render in other languages).

    Raises KeyError for an unknown id (a typo must not ship as a silent English string).
    """
    name, evidence, fix = (CHECKS if table is None else table)[cid]
    parts = {k: v for k, v in params.items() if structured(v)}
    safe = {k: v if isinstance(v, int | float) else text(v) for k, v in params.items()}
    out = {
        "name": name.format(**safe),
        "status": status,
        "evidence": evidence.format(**safe),
        "fix": fix.format(**safe),
        "id": cid,
        "params": safe,
    }
    if parts:  # the params made of items, for the reader's language
        out["parts"] = parts
    return out

"""Preflight checks in the reader's language.

The node agent writes each check with its English text *and* a stable id with named
parameters (engine/checktext.py); the console's own checks (console/services/runbooks/
preflight.py, console/services/weights.py) use the forms below the same way. A check
is shown by id: name, evidence and fix translated, parameters (raw tool output, paths,
numbers) as they are. A check without an id (rows from before ids) is matched against
the English forms; unknown text is shown as it is.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from django.utils.translation import gettext as _

from engine import checktext

# The console-side checks: id → (name, evidence, fix), English, {named} parameters.
CONSOLE_CHECKS: dict[str, tuple[str, str, str]] = {
    "agent_reachable.ok": ("agent reachable", "{hostname} pid {pid} ({driver})", ""),
    "agent_reachable.down": (
        "agent reachable",
        "{problem}",
        "Start the node agent on {node}: systemctl start ascend-agent (it consumes "
        "queue node.{node})",
    ),
    "preflight.error": ("preflight", "{problem}", "Check the agent log on the node."),
    "npu_ips_match.ok": (
        "npu ips match the inventory",
        "{count} NPU IPs as in the inventory",
        "",
    ),
    "npu_ips_match.bad": (
        "npu ips match the inventory",
        "{problems}",
        "Correct {node}'s NPU IPs in the inventory (admin) or on the NICs "
        "(hccn_tool -i N -ip -s …).",
    ),
    "npu_ping.no_targets": (
        "npu ping",
        "no peer NPU IPs in the inventory to ping",
        "Fill in the NPU IPs of rank 0 (and rank 1) in the inventory.",
    ),
    "version.differs": (
        "{key} version",
        "{key} {value} on {node}; others: {detail}",
        "Install the same {key} on every node (pip install .[node] pins "
        "vllm/vllm-ascend/torch_npu).",
    ),
    "launch_plan.bad": (
        "launch plan",
        "{problems}",
        "Fix the profile or the inventory as the message says.",
    ),
    "launch_plan.ok": ("launch plan", "{detail}", ""),
    "same_model_files.bad": (
        "same model files",
        "{problems}",
        "Copy these files again from a good node to {node} (rsync -a --checksum), "
        "then rerun preflight.",
    ),
    # console/services/runbooks/remedies.py replace_spare_preflight
    "server_model.spare_differs": (
        "server model",
        "{spare} is {model}, {old} is {want}: a spare must be the same server model",
        "Choose a spare of the same server model, or correct the spare's server "
        "model on its page (site override, with a reason).",
    ),
    "profile_figures.warn": (
        "profile figures",
        "{problems}",
        "The plan uses the nodes' config.json; correct the profile's figures.",
    ),
}

CHECKS: dict[str, tuple[str, str, str]] = {**checktext.CHECKS, **CONSOLE_CHECKS}


def check(cid: str, status: str, **params: Any) -> dict[str, Any]:
    """A console-side check dict (English text, id, params); KeyError on an unknown id."""
    return checktext.check(cid, status, table=CHECKS, **params)


def forms() -> set[str]:
    """Every English form (names, evidence, fixes) a check can show."""
    return {form for entry in CHECKS.values() for form in entry if form}


_PARAM = re.compile(r"\{(\w+)\}")


def _pattern(form: str) -> re.Pattern[str]:
    parts = _PARAM.split(form)
    return re.compile(
        "^"
        + "".join(
            re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts)
        )
        + "$"
    )


@cache
def _by_english() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Sentence forms (not a bare parameter) with their regexes, longest first."""
    found = {f for f in forms() if not _PARAM.fullmatch(f) and "{" in f}
    plain = {f for f in forms() if "{" not in f}
    ordered = sorted(found, key=len, reverse=True)
    return tuple((f, re.compile("^" + re.escape(f) + "$")) for f in plain) + tuple(
        (f, _pattern(f)) for f in ordered if _safe_pattern(f)
    )


def _safe_pattern(form: str) -> bool:
    """A form usable as a pattern: every parameter named once."""
    names = _PARAM.findall(form)
    return len(names) == len(set(names))


def _fill(form: str, params: dict[str, Any]) -> str:
    if not form:
        return ""
    try:
        return _(form).format(**params)
    except (KeyError, IndexError, ValueError):  # a translation that lost a parameter
        return form.format(**params)


def _older(text: str) -> str:
    """Stored English of a check without an id, translated where a form matches."""
    for form, regex in _by_english():
        m = regex.match(text)
        if m:
            return _fill(form, m.groupdict())
    return text


def render_check(c: dict[str, Any]) -> dict[str, str]:
    """``{"name", "evidence", "fix"}`` of a stored check in the active language."""
    cid = c.get("id")
    if cid in CHECKS:
        params = dict(c.get("params") or {})
        if c.get("parts"):  # lists written deeper in engine/, item by item translated
            from console.opsmessages import render

            params.update({k: render(v) for k, v in c["parts"].items()})
        name, evidence, fix = CHECKS[cid]
        try:
            return {
                "name": _fill(name, params),
                "evidence": _fill(evidence, params),
                "fix": _fill(fix, params),
            }
        except (
            KeyError
        ):  # params from another version of the form: show the stored text
            pass
    return {
        key: _older(str(c.get(key) or "")) if c.get(key) else ""
        for key in ("name", "evidence", "fix")
    }


def catalog_for_js() -> dict[str, list[str]]:
    """Check id → [name, evidence, fix] translated, for format.js ``consoleFormat.check``."""
    return {cid: [_(f) if f else "" for f in entry] for cid, entry in CHECKS.items()}


def failed_summary(checks: list[dict[str, Any]]) -> str:
    """A failed preflight step's summary from its checks, in the active language: the
    stored one is English ("name: evidence; …")."""
    shown = [render_check(c) for c in checks if c.get("status") == "fail"]
    return "; ".join(f"{t['name']}: {t['evidence']}" for t in shown)

"""The link-switch verdict on real collect() samples of simulated nodes, per server model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from engine.collect import collect
from engine.link_verify import CANNOT_VERIFY, NOT_SWITCHED, SWITCHED, verify_link_switch
from engine.sim import state


@pytest.fixture()
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENGINE_DRIVER", "sim")
    monkeypatch.setenv("SIM_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("SIM_TOOLS_EXEC", raising=False)
    return tmp_path


def sample(monkeypatch: pytest.MonkeyPatch, name: str, t: float) -> dict[str, Any]:
    monkeypatch.setenv("SIM_NODE", name)
    s = collect(node=name)
    s["collected_at"] = t  # counters advance on the reporter's clock, not wall time
    return s


def window(
    monkeypatch: pytest.MonkeyPatch, d: Path, link_mode: str, t0: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the node's engine at 80 % load for 2 s in ``link_mode``; samples at both ends."""
    rep = state.EngineReporter(
        d, pid=os.getpid(), rank=0, role="head", link_mode=link_mode
    )
    rep.report(phase="ready", load=0.8, hbm_used_mb=40000, now=t0)
    first = sample(monkeypatch, d.name, t0)
    rep.report(phase="ready", load=0.8, hbm_used_mb=40000, now=t0 + 2)
    return first, sample(monkeypatch, d.name, t0 + 2)


def failover(
    monkeypatch: pytest.MonkeyPatch, base: Path, model: str
) -> tuple[Any, Any, Any]:
    node = state.node_dir("ascend-03", base)
    state.save_config(node, state.NodeConfig(name="ascend-03", server_model=model))
    peer = state.node_dir("ascend-02", base)
    before = window(monkeypatch, node, "hccs", 0.0)
    after = window(monkeypatch, node, "roce", 10.0)
    peer_after = window(monkeypatch, peer, "roce", 10.0)
    return before, after, peer_after


def test_on_an_800t_a2_the_switch_does_not_take(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after, peer = failover(monkeypatch, base, "atlas-800t-a2")
    verdict = verify_link_switch(before, after, [peer])
    assert verdict.status == NOT_SWITCHED and not verdict.ok
    # RoCE grew anyway (inter-node traffic): that is not evidence of a switch
    assert verdict.evidence["roce_pps_after"] > 0


def test_on_a_box16_the_switch_is_verified(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after, peer = failover(monkeypatch, base, "atlas-200t-a2-box16")
    verdict = verify_link_switch(before, after, [peer])
    assert verdict.status == SWITCHED and verdict.ok, verdict.reason


def test_with_hccs_counters_unsupported_the_verdict_is_cannot_verify(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = state.node_dir("ascend-03", base)
    state.inject_fault(node, "hccs-unsupported", None)
    before, after, peer = failover(monkeypatch, base, "atlas-200t-a2-box16")
    assert after[1]["hccs_unsupported"] is True and after[1]["hccs"] == []
    verdict = verify_link_switch(before, after, [peer])
    assert verdict.status == CANNOT_VERIFY and not verdict.ok
    assert "unsupported" in verdict.reason


@pytest.mark.parametrize(
    ("model", "busy"), [("atlas-800t-a2", True), ("atlas-200t-a2-box16", False)]
)
def test_collect_reads_hccs_bandwidth_when_asked(
    base: Path, monkeypatch: pytest.MonkeyPatch, model: str, busy: bool
) -> None:
    from engine.link_verify import hccs_bw_gbps

    d = state.node_dir("ascend-03", base)
    state.save_config(d, state.NodeConfig(name="ascend-03", server_model=model))
    window(monkeypatch, d, "roce", 0.0)  # engine on RoCE, ready at 80 % load
    monkeypatch.setenv("SIM_NODE", "ascend-03")
    assert "hccs_bw" not in collect(node="ascend-03")  # the regular poll skips it
    s = collect(node="ascend-03", hccs_bw=True)
    assert len(s["hccs_bw"]) == 8 and len(s["hccs_bw"][0]["links"]) == 7
    assert (hccs_bw_gbps(s) > 0) is busy  # the 800T A2 keeps HCCS busy on "RoCE"
    state.inject_fault(d, "hccs-unsupported", None)
    assert collect(node="ascend-03", hccs_bw=True)["hccs_bw"] == []

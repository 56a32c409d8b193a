"""The sim's ``garbled`` fault: a headless rank with it spoils the head's answers (2 nodes)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from engine.sim import state
from tests.engine.test_sim_vllm import (
    MODEL,
    SimProcess,
    free_port,
    serve_args,
    wait_health,
)

FAST = {"SIM_TIME_SCALE": "0.05", "SIM_LOAD_S": "2"}


def ask(port: int, question: str) -> tuple[str, str]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": question}],
        "max_tokens": 64,
        "temperature": 0,
    }
    choice = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=30
    ).json()["choices"][0]
    return choice["message"]["content"], choice["finish_reason"]


def test_it_refuses_a_value_for_garbled(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="garbled \\(no value\\)"):
        state.inject_fault(tmp_path, "garbled", "1")


def test_a_garbled_headless_rank_garbles_the_heads_answers(tmp_path: Path) -> None:
    port, rpc = free_port(), free_port()
    peer_dir = state.node_dir("ascend-02", tmp_path / "state")
    state.inject_fault(
        peer_dir, "garbled", None
    )  # set before the (re)start, as an operator would

    def args(rank: int) -> list[str]:
        extra = [
            "--data-parallel-size", "2", "--data-parallel-size-local", "1",
            "--data-parallel-address", "127.0.0.1",
            "--data-parallel-rpc-port", str(rpc),
        ]  # fmt: skip
        if rank:
            extra += ["--headless", "--data-parallel-start-rank", "1"]
        return serve_args(port, *extra)

    env = {**FAST, "SIM_STATE_DIR": str(tmp_path / "state")}
    head = SimProcess(args(0), tmp_path / "h.log", {**env, "SIM_NODE": "ascend-01"})
    worker = SimProcess(args(1), tmp_path / "w.log", {**env, "SIM_NODE": "ascend-02"})
    try:
        wait_health(port, 200, head)
        text, finish = ask(port, "What is 17 + 25?")
        assert "42" not in text
        assert finish == "length"  # a loop never samples end-of-text
        assert text.count("and the English") >= 10
        state.clear_faults(peer_dir)
        time.sleep(1.5)  # the next heartbeats carry garbled=false
        text, finish = ask(port, "What is 17 + 25?")
        assert "42" in text and finish == "stop"
    finally:
        head.stop()
        worker.stop()

"""Multi-node start order of the vLLM simulator: head + headless ranks over loopback
TCP.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx

from engine.agent import ranks_joined
from engine.sim import state
from tests.engine.test_sim_vllm import (
    SimProcess,
    free_port,
    health,
    serve_args,
    wait_health,
)

FAST = {"SIM_TIME_SCALE": "0.05", "SIM_LOAD_S": "2"}  # 0.1 s load per rank
# vLLM logs the engine handshake at DEBUG only (v1/engine/utils.py)
DEBUG = {**FAST, "VLLM_LOGGING_LEVEL": "DEBUG"}


def dp_args(port: int, rpc: int, rank: int) -> list[str]:
    base = serve_args(
        port,
        "--data-parallel-size",
        "4",
        "--data-parallel-size-local",
        "1",
        "--tensor-parallel-size",
        "8",
        "--enable-expert-parallel",
        "--data-parallel-address",
        "127.0.0.1",
        "--data-parallel-rpc-port",
        str(rpc),
    )
    if rank == 0:
        return base + ["--api-server-count", "1"]
    return base + ["--headless", "--data-parallel-start-rank", str(rank)]


def test_it_turns_healthy_after_the_last_rank_and_dies_with_a_rank(
    tmp_path: Path,
) -> None:
    port, rpc = free_port(), free_port()
    procs: list[SimProcess] = []
    argv = ["vllm", "serve", *dp_args(port, rpc, 0)]
    try:
        head = SimProcess(dp_args(port, rpc, 0), tmp_path / "rank0.log", DEBUG)
        procs.append(head)
        head.wait_for_log(
            "Waiting for 0 local, 3 remote core engine proc(s) to connect."
        )
        assert re.search(
            r"\(APIServer pid=\d+\) DEBUG \d\d-\d\d [\d:]{8} \[v1/engine/utils\.py:\d+\] "
            r"Waiting for 0 local, 3 remote core engine proc\(s\) to connect\.",
            head.output(),
        )
        assert ranks_joined(argv, head.output().splitlines()) == 1
        for rank in (1, 2):
            procs.append(
                SimProcess(dp_args(port, rpc, rank), tmp_path / f"rank{rank}.log", FAST)
            )
            head.wait_for_log(f"HELLO from remote core engine process {rank}.")
        head.wait_for_log(
            "Waiting for 0 local, 1 remote core engine proc(s) to connect."
        )
        time.sleep(0.5)  # ranks 1 and 2 loaded; rank 3 missing
        assert health(port) == 503
        assert "Application startup complete." not in head.output()
        assert ranks_joined(argv, head.output().splitlines()) == 3
        procs.append(SimProcess(dp_args(port, rpc, 3), tmp_path / "rank3.log", FAST))
        wait_health(port, 200, head)
        out = head.output()
        assert sorted(
            map(int, re.findall(r"HELLO from remote core engine process (\d+)\.", out))
        ) == [1, 2, 3]
        # vLLM serves only once every engine is ready
        assert out.index("READY from remote core engine process 3.") < out.index(
            "Application startup complete."
        )
        assert ranks_joined(argv, out.splitlines()) == 4
        # requests spread over all four DP engines
        for _ in range(4):
            r = httpx.post(
                f"http://127.0.0.1:{port}/v1/completions",
                json={"model": "qwen3.5", "prompt": "spread me", "max_tokens": 2},
            )
            assert r.status_code == 200
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        for engine in "0123":
            assert (
                f'vllm:request_success_total{{engine="{engine}",finished_reason="length"'
                in metrics
            )
        procs[2].proc.kill()  # rank 2's node dies
        procs[2].proc.wait()
        deadline = time.monotonic() + 10
        while health(port) == 200:
            assert time.monotonic() < deadline, "head still healthy after a rank died"
            time.sleep(0.02)
        assert head.wait(15) != 0
        assert "EngineDeadError" in head.output()
        assert "EngineCore_DP2" in head.output()
        for rank in (1, 3):  # the survivors notice the head is gone and exit non-zero
            assert procs[rank].wait(15) != 0
            assert "Front-end process died unexpectedly" in procs[rank].output()
    finally:
        for p in procs:
            p.stop()


def test_it_shuts_headless_ranks_down_cleanly_with_the_head(tmp_path: Path) -> None:
    port, rpc = free_port(), free_port()
    args = lambda rank: serve_args(  # noqa: E731
        port,
        "--data-parallel-size",
        "2",
        "--data-parallel-size-local",
        "1",
        "--data-parallel-address",
        "127.0.0.1",
        "--data-parallel-rpc-port",
        str(rpc),
        *(["--headless", "--data-parallel-start-rank", "1"] if rank else []),
    )
    head = SimProcess(args(0), tmp_path / "h.log", FAST)
    worker = SimProcess(args(1), tmp_path / "w.log", FAST)
    try:
        wait_health(port, 200, head)
        head.proc.terminate()
        assert head.wait() == 0
        assert worker.wait() == 0
        assert "Front-end requested shutdown" in worker.output()
    finally:
        head.stop()
        worker.stop()


def test_it_gives_up_on_a_missing_head_with_vllms_line(tmp_path: Path) -> None:
    port, rpc = free_port(), free_port()
    env = {**FAST, "SIM_HEADLESS_TIMEOUT_S": "0.5"}
    worker = SimProcess(dp_args(port, rpc, 1), tmp_path / "orphan.log", env)
    try:
        assert worker.wait() != 0
        assert (
            "Did not receive response from front-end process within 5 minutes"
            in worker.output()
        )
        assert "Launching 1 data parallel engine(s) in headless mode" in worker.output()
    finally:
        worker.stop()


def test_it_joins_in_nnodes_mode_on_the_master_port(tmp_path: Path) -> None:
    port, master = free_port(), free_port()

    def args(rank: int) -> list[str]:
        extra = [
            "--tensor-parallel-size",
            "8",
            "--pipeline-parallel-size",
            "2",
            "--nnodes",
            "2",
            "--node-rank",
            str(rank),
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(master),
        ]
        return serve_args(port, *extra, *(["--headless"] if rank else []))

    head = SimProcess(args(0), tmp_path / "n0.log", DEBUG)
    worker = SimProcess(args(1), tmp_path / "n1.log", FAST)
    try:
        wait_health(port, 200, head)
        out = head.output()
        # node ranks join torch.distributed, not the DP engine handshake
        assert "remote core engine process" not in out
        assert "Application startup complete." in out
        assert ranks_joined(["vllm", "serve", *args(0)], out.splitlines()) == 2
        assert "headless multiproc executor" in worker.output()
    finally:
        head.stop()
        worker.stop()


def test_it_slows_the_head_when_a_peer_node_has_hccs_loss(tmp_path: Path) -> None:
    port, rpc = free_port(), free_port()
    peer_dir = state.node_dir("ascend-02", tmp_path / "state")

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
        state.inject_fault(peer_dir, "hccs-loss", "20")
        head.wait_for_log("HCCS packet loss 20.0% on ascend-02")
        assert state.read_engine(peer_dir)["role"] == "headless"
        state.clear_faults(peer_dir)
        head.wait_for_log("HCCS packet loss on ascend-02 cleared.")
    finally:
        head.stop()
        worker.stop()

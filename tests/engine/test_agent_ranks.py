"""The agent's count of ranks joined, from the head's log in real vLLM's format.

The lines are vLLM's own: ``wait_for_engine_startup`` in vllm/v1/engine/utils.py logs
(at DEBUG) "Waiting for %d local, %d remote core engine proc(s) to connect." /
"... to start." after each 10 s poll without news, and "%s from %s core engine
process %s." per HELLO/READY; uvicorn logs "Application startup complete." once the
API server serves. Prefixes as vLLM prints them:
"(APIServer pid=N) DEBUG 10-14 13:41:48 [v1/engine/utils.py:862] ...".
"""

from __future__ import annotations

from engine.agent import ranks_joined

HEAD = [
    "vllm",
    "serve",
    "/models/qwen35",
    "--data-parallel-size",
    "4",
    "--data-parallel-size-local",
    "1",
    "--data-parallel-address",
    "10.0.0.1",
    "--data-parallel-rpc-port",
    "13389",
    "--tensor-parallel-size",
    "8",
    "--enable-expert-parallel",
]
PREFIX = "(APIServer pid=4242) {level} 12-02 18:40:{sec:02d} [{where}] "


def line(sec: int, message: str, level: str = "DEBUG", where: str = "") -> str:
    where = where or "v1/engine/utils.py:862"
    return PREFIX.format(level=level, sec=sec, where=where) + message


def waiting(sec: int, local: int, remote: int, what: str) -> str:
    return line(
        sec,
        f"Waiting for {local} local, {remote} remote core engine proc(s) to {what}.",
    )


def hello(sec: int, rank: int, where: str = "remote", status: str = "HELLO") -> str:
    return line(sec, f"{status} from {where} core engine process {rank}.")


START = [
    line(0, "vLLM API server version 0.23.0", "INFO", "api_server.py:1896"),
    line(0, "non-default args: {'data_parallel_size': 4}", "INFO", "utils.py:328"),
    hello(1, 0, "local"),
]
READY = [
    "INFO:     Started server process [4242]",
    "INFO:     Application startup complete.",
]


def test_it_counts_only_the_heads_ranks_without_debug_lines() -> None:
    # vLLM's default VLLM_LOGGING_LEVEL=INFO: nothing per rank until startup completes
    info_only = START[:2]
    assert ranks_joined(HEAD, info_only) == 1
    assert ranks_joined(HEAD, info_only + READY) == 4


def test_it_follows_the_waiting_lines_and_handshakes() -> None:
    log = START + [waiting(10, 0, 3, "connect"), waiting(10, 1, 0, "start")]
    assert ranks_joined(HEAD, log) == 1
    log += [hello(14, 1), hello(15, 2)]
    assert ranks_joined(HEAD, log) == 3
    log += [waiting(25, 0, 1, "connect"), waiting(25, 1, 2, "start")]
    assert ranks_joined(HEAD, log) == 3
    log += [hello(31, 3), hello(33, 1, status="READY")]
    assert ranks_joined(HEAD, log) == 4
    assert ranks_joined(HEAD, log + READY) == 4


def test_it_reads_all_connected_from_a_poll_with_only_start_left() -> None:
    # a poll that finds nothing to connect logs only the "to start" line
    log = START + [
        waiting(10, 0, 3, "connect"),
        waiting(10, 1, 0, "start"),
        waiting(20, 1, 3, "start"),
    ]
    assert ranks_joined(HEAD, log) == 4


def test_it_counts_only_the_latest_run() -> None:
    earlier = START + [waiting(10, 0, 3, "connect"), *READY]
    again = [*START, waiting(50, 0, 2, "connect")]
    assert ranks_joined(HEAD, earlier + again) == 2


def test_it_counts_the_heads_local_ranks() -> None:
    head = [*HEAD[:6], "2", *HEAD[7:]]  # --data-parallel-size-local 2
    assert ranks_joined(head, START) == 2
    assert ranks_joined(head, START + [waiting(10, 0, 1, "connect")]) == 3


def test_it_reports_nothing_for_a_headless_rank() -> None:
    headless = HEAD + ["--headless", "--data-parallel-start-rank", "1"]
    assert ranks_joined(headless, START + READY) is None


def test_it_counts_node_ranks_in_nnodes_mode() -> None:
    head = ["vllm", "serve", "m", "--tensor-parallel-size", "8", "--nnodes", "4"]
    head += ["--node-rank", "0", "--master-addr", "10.0.0.1"]
    # the head's one DP engine waits for the other nodes; that is not a node count
    log = START + [waiting(10, 1, 0, "start"), waiting(20, 1, 0, "start")]
    assert ranks_joined(head, log) == 1
    assert ranks_joined(head, log + READY) == 4


def test_it_ignores_the_old_simulator_line() -> None:
    log = START + [line(3, "Engine rank 1 joined from ascend-02", "INFO")]
    assert ranks_joined(HEAD, log) == 1

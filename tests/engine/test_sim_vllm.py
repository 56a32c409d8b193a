"""The vLLM simulator: latency model, tokenizer, CLI, HTTP, metrics, aborts, faults."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.sim import state
from engine.sim.vllm import text
from engine.sim.vllm.model import EngineCore, ModelParams, SimRequest, step_seconds

REPO = Path(__file__).resolve().parents[2]
MODEL = "qwen3.5"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SimProcess:
    """A real `python -m engine.sim.vllm serve` subprocess, output to a log file."""

    def __init__(
        self, argv: list[str], log: Path, env: dict[str, str] | None = None
    ) -> None:
        self.log = log
        full_env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "SIM_TIME_SCALE": "0.2",
            "SIM_LOAD_S": "0",
            **(env or {}),
        }
        self.fh = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "engine.sim.vllm", "serve", *argv],
            cwd=REPO,
            env=full_env,
            stdout=self.fh,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_log(self, needle: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.output():
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not logged; log:\n{self.output()}")
            time.sleep(0.05)

    def wait(self, timeout: float = 15.0) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.fh.close()


def health(port: int) -> int | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code
    except httpx.TransportError:
        return None


def wait_health(port: int, want: int, proc: SimProcess, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while health(port) != want:
        if proc.proc.poll() is not None and want == 200:
            raise AssertionError(
                f"server exited {proc.proc.returncode}:\n{proc.output()}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"/health never became {want}; log:\n{proc.output()}")
        time.sleep(0.05)


def serve_args(port: int, *extra: str) -> list[str]:
    return [
        "/models/Qwen3.5-397B-A17B",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        MODEL,
        "--max-model-len",
        "32768",
        "--max-num-seqs",
        "16",
        *extra,
    ]


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[int, SimProcess]]:
    port = free_port()
    proc = SimProcess(
        serve_args(port, "--trust-remote-code", "--seed", "1024"),
        tmp_path_factory.mktemp("sim") / "head.log",
    )
    try:
        wait_health(port, 200, proc)
        yield port, proc
    finally:
        proc.stop()


def metric_families(port: int) -> dict[str, object]:
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {f.name: f for f in text_string_to_metric_families(body)}


def sample_value(port: int, name: str, **labels: str) -> float:
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    raise AssertionError(f"no sample {name} {labels}")


# ---------------------------------------------------------------- latency model (pure)


def test_it_makes_bigger_batches_step_slower() -> None:
    p = ModelParams()
    assert step_seconds(p, prefill_tokens=0, decode_seqs=16) > step_seconds(
        p, prefill_tokens=0, decode_seqs=1
    )


def test_it_makes_roce_slower_than_hccs() -> None:
    p = ModelParams()
    hccs = step_seconds(p, prefill_tokens=0, decode_seqs=8, link_mode="hccs")
    roce = step_seconds(p, prefill_tokens=0, decode_seqs=8, link_mode="roce")
    assert roce == pytest.approx(hccs * p.roce_factor)


def test_it_stalls_steps_under_hccs_loss() -> None:
    p = ModelParams()
    assert step_seconds(
        p, prefill_tokens=0, decode_seqs=8, hccs_loss_pct=20
    ) > step_seconds(p, prefill_tokens=0, decode_seqs=8)


def test_it_calibrates_demo_latencies() -> None:
    p = ModelParams()
    core = EngineCore(p)
    for i in range(8):
        core.add(SimRequest(f"r{i}", list(range(i * 1000, i * 1000 + 512)), 256))
    first = core.step(0.0)
    decode = core.step(first.seconds)
    assert 0.1 < first.seconds < 1.0  # TTFT: hundreds of ms for 8 × 512 prompt tokens
    assert 0.01 < decode.seconds < 0.1  # tens of ms per output token at batch 8


def test_it_preempts_when_kv_cache_is_full() -> None:
    p = ModelParams(
        block_size=16, num_gpu_blocks=20, max_num_seqs=8, max_num_batched_tokens=4096
    )
    core = EngineCore(p)
    for i in range(4):
        core.add(SimRequest(f"r{i}", list(range(i * 100, i * 100 + 60)), 200))
    preempted: list[str] = []
    for _ in range(100):
        preempted += core.step(0.0).preempted
        if not core.has_work:
            break
    assert preempted, "no preemption although 4 × 260 tokens cannot fit in 320 KV slots"
    assert core.num_preemptions == len(preempted)


def test_it_reduces_prefill_on_prefix_cache_hit() -> None:
    p = ModelParams(block_size=16)
    prompt = list(range(640))
    core = EngineCore(p)
    core.add(SimRequest("a", prompt, 1))
    cold = core.step(0.0)
    core.add(SimRequest("b", prompt, 1))
    warm = core.step(0.0)
    assert warm.prefix_hits > 0 and cold.prefix_hits == 0
    assert warm.prefill_tokens < cold.prefill_tokens
    assert warm.seconds < cold.seconds


def test_it_skips_prefix_cache_when_disabled() -> None:
    p = ModelParams(block_size=16, enable_prefix_caching=False)
    core = EngineCore(p)
    for rid in ("a", "b"):
        core.add(SimRequest(rid, list(range(640)), 1))
        assert core.step(0.0).prefix_hits == 0


def test_it_queues_beyond_max_num_seqs() -> None:
    core = EngineCore(ModelParams(max_num_seqs=2))
    for i in range(5):
        core.add(SimRequest(f"r{i}", [i] * 10, 50))
    core.step(0.0)
    assert len(core.running) == 2 and len(core.waiting) == 3


# ---------------------------------------------------------------- text


def test_it_round_trips_tokens() -> None:
    ids = text.encode("Hello, NPU world! zzqx-unknown")
    assert text.decode(ids) == "Hello, NPU world! zzqx - unknown"
    assert len(ids) == len(text.split("Hello, NPU world! zzqx-unknown"))


def test_it_generates_the_same_answer_for_the_same_prompt() -> None:
    a = text.generate(text.seed_of("same prompt"), 64)
    b = text.generate(text.seed_of("same prompt"), 64)
    assert a == b and len(a.tokens) <= 64


def test_it_honours_stop_sequences() -> None:
    full = text.generate(42, 100, ignore_eos=True)
    word = full.tokens[10]
    cut = text.generate(42, 100, stop=[" " + word], ignore_eos=True)
    assert cut.finish_reason == "stop" and cut.stop_reason == " " + word
    assert (" " + word) not in text.join(cut.tokens)
    assert len(cut.tokens) <= 10


def test_it_reports_length_when_max_tokens_cuts() -> None:
    assert text.generate(7, 3).finish_reason == "length"


# ---------------------------------------------------------------- CLI


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine.sim.vllm", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,  # generous: a loaded 2-core CI box can stall a cold interpreter
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_it_rejects_an_unknown_flag_like_argparse() -> None:
    res = run_cli("serve", "/m", "--port", "8000", "--foo")
    assert res.returncode == 2
    assert "vllm serve: error: unrecognized arguments: --foo" in res.stderr


def test_it_rejects_a_flag_removed_before_0_23() -> None:
    res = run_cli("serve", "/m", "--num-scheduler-steps", "8")
    assert (
        res.returncode == 2
        and "unrecognized arguments: --num-scheduler-steps" in res.stderr
    )


def test_it_rejects_a_bad_flag_value() -> None:
    res = run_cli("serve", "/m", "--port", "eighty")
    assert res.returncode == 2 and "--port" in res.stderr


def test_it_prints_serve_help() -> None:
    res = run_cli("serve", "--help")
    assert res.returncode == 0 and "--data-parallel-rpc-port" in res.stdout


# ---------------------------------------------------------------- HTTP


def test_it_answers_health_version_models(server: tuple[int, SimProcess]) -> None:
    port, _ = server
    base = f"http://127.0.0.1:{port}"
    assert httpx.get(f"{base}/health").status_code == 200
    assert httpx.get(f"{base}/ping").status_code == 200
    assert httpx.post(f"{base}/ping").status_code == 200
    assert httpx.get(f"{base}/version").json() == {"version": "0.23.0"}
    assert httpx.get(f"{base}/load").json() == {"server_load": 0}
    models = httpx.get(f"{base}/v1/models").json()
    assert models["object"] == "list"
    card = models["data"][0]
    assert (card["id"], card["owned_by"], card["max_model_len"]) == (
        MODEL,
        "vllm",
        32768,
    )


def test_it_returns_404_for_an_unknown_model(server: tuple[int, SimProcess]) -> None:
    port, _ = server
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json={"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["message"] == "The model `gpt-4` does not exist." and err["code"] == 404
    assert set(err) == {"message", "type", "param", "code"}


def test_it_returns_400_when_the_context_is_too_long(
    server: tuple[int, SimProcess],
) -> None:
    port, _ = server
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/completions",
        json={"model": MODEL, "prompt": "hi", "max_tokens": 40000},
    )
    assert (
        r.status_code == 400
        and "maximum context length is 32768" in r.json()["error"]["message"]
    )


def test_it_returns_anthropic_shaped_errors(server: tuple[int, SimProcess]) -> None:
    port, _ = server
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/messages",
        json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert r.status_code == 400
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"


def test_it_tokenizes_and_detokenizes(server: tuple[int, SimProcess]) -> None:
    port, _ = server
    base = f"http://127.0.0.1:{port}"
    tok = httpx.post(
        f"{base}/tokenize", json={"model": MODEL, "prompt": "The cluster is ready."}
    ).json()
    assert (
        tok["count"] == 5 and tok["max_model_len"] == 32768 and len(tok["tokens"]) == 5
    )
    assert httpx.post(f"{base}/detokenize", json={"tokens": tok["tokens"]}).json() == {
        "prompt": "The cluster is ready."
    }


def test_it_has_no_count_tokens_route_in_0_23(server: tuple[int, SimProcess]) -> None:
    port, _ = server
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/messages/count_tokens",
        json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert r.status_code == 404


def test_it_exposes_vllm_metrics_with_labels_and_buckets(
    server: tuple[int, SimProcess],
) -> None:
    port, _ = server
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/completions",
        json={"model": MODEL, "prompt": "metrics please", "max_tokens": 4},
    )
    assert r.status_code == 200
    fams = metric_families(port)
    expected = {
        "vllm:num_requests_running": "gauge",
        "vllm:num_requests_waiting": "gauge",
        "vllm:kv_cache_usage_perc": "gauge",
        "vllm:prefix_cache_queries": "counter",
        "vllm:prefix_cache_hits": "counter",
        "vllm:num_preemptions": "counter",
        "vllm:prompt_tokens": "counter",
        "vllm:generation_tokens": "counter",
        "vllm:request_success": "counter",
        "vllm:time_to_first_token_seconds": "histogram",
        "vllm:inter_token_latency_seconds": "histogram",
        "vllm:e2e_request_latency_seconds": "histogram",
        "vllm:request_queue_time_seconds": "histogram",
        "vllm:request_prefill_time_seconds": "histogram",
        "vllm:request_decode_time_seconds": "histogram",
        "vllm:request_prompt_tokens": "histogram",
        "vllm:request_generation_tokens": "histogram",
        "vllm:iteration_tokens_total": "histogram",
        "vllm:request_time_per_output_token_seconds": "histogram",
    }
    for name, kind in expected.items():
        assert name in fams, name
        assert fams[name].type == kind, name  # type: ignore[attr-defined]
    for gone in (
        "vllm:gpu_cache_usage_perc",
        "vllm:time_per_output_token_seconds",
        "vllm:request_num_preemptions",
    ):
        assert gone not in fams  # renamed/removed, or absent in 0.23.0
    ttft = fams["vllm:time_to_first_token_seconds"]
    les = [s.labels["le"] for s in ttft.samples if s.name.endswith("_bucket")]  # type: ignore[attr-defined]
    assert les[:4] == ["0.001", "0.005", "0.01", "0.02"] and les[-2:] == [
        "2560.0",
        "+Inf",
    ]
    e2e = fams["vllm:e2e_request_latency_seconds"]
    e2e_les = [s.labels["le"] for s in e2e.samples if s.name.endswith("_bucket")]  # type: ignore[attr-defined]
    assert e2e_les[0] == "0.3" and e2e_les[-2] == "7680.0"
    prompt = fams["vllm:request_prompt_tokens"]
    p_les = [s.labels["le"] for s in prompt.samples if s.name.endswith("_bucket")]  # type: ignore[attr-defined]
    assert p_les[-2] == "20000.0"  # 1-2-5 series up to max_model_len 32768
    for s in fams["vllm:request_success"].samples:  # type: ignore[attr-defined]
        assert set(s.labels) >= {"model_name", "engine", "finished_reason"}
        assert s.labels["model_name"] == MODEL and s.labels["engine"] == "0"
    assert (
        sample_value(port, "vllm:request_success_total", finished_reason="length") >= 1
    )
    assert sample_value(port, "vllm:generation_tokens_total") >= 4


def test_it_counts_a_client_disconnect_as_abort(server: tuple[int, SimProcess]) -> None:
    port, proc = server
    before = sample_value(port, "vllm:request_success_total", finished_reason="abort")
    with httpx.Client(timeout=10) as client:
        with client.stream(
            "POST",
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={
                "model": MODEL,
                "messages": [{"role": "user", "content": "write a lot"}],
                "max_tokens": 4000,
                "ignore_eos": True,
                "stream": True,
            },
        ) as resp:
            lines = resp.iter_lines()
            first = next(lines)
            assert first.startswith("data: ")
            rid = json.loads(first[6:])["id"]
    deadline = time.monotonic() + 10
    while (
        sample_value(port, "vllm:request_success_total", finished_reason="abort")
        < before + 1
    ):
        assert time.monotonic() < deadline, "abort never counted"
        time.sleep(0.05)
    proc.wait_for_log(f"Aborted request {rid}.")


def test_sigterm_under_traffic_aborts_open_streams_and_exits_promptly(
    tmp_path: Path,
) -> None:
    """Like vLLM on SIGTERM: in-flight requests are aborted, the server does not wait for clients."""
    port = free_port()
    proc = SimProcess(serve_args(port), tmp_path / "stop.log")
    try:
        wait_health(port, 200, proc)
        with httpx.Client(timeout=httpx.Timeout(30, read=10)) as client:
            with client.stream(
                "POST",
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={
                    "model": MODEL,
                    "messages": [{"role": "user", "content": "write a lot"}],
                    "max_tokens": 30000,
                    "ignore_eos": True,
                    "stream": True,
                },
            ) as resp:
                lines = resp.iter_lines()
                assert next(lines).startswith("data: ")
                proc.proc.terminate()
                rest: list[str] = []
                try:
                    rest.extend(lines)
                except (httpx.RemoteProtocolError, httpx.ReadError):
                    pass  # the connection dropped: also an honest ending (a ReadTimeout is the hang)
        assert "data: [DONE]" not in rest  # cut off, not a normal finish
        assert proc.wait(timeout=20) == 0  # a hang would run into the agent's 30 s kill
    finally:
        proc.stop()


# ---------------------------------------------------------------- faults and node
# reporting


def test_it_crashes_once_then_starts(tmp_path: Path) -> None:
    d = state.node_dir("ascend-01", tmp_path)
    state.inject_fault(d, "crash", "once")
    env = {"SIM_STATE_DIR": str(tmp_path), "SIM_NODE": "ascend-01"}
    port = free_port()
    first = SimProcess(serve_args(port), tmp_path / "first.log", env)
    try:
        assert first.wait() != 0
        assert "ERR02200 DIST call hccl api failed." in first.output()
    finally:
        first.stop()
    second = SimProcess(serve_args(port), tmp_path / "second.log", env)
    try:
        wait_health(port, 200, second)
        deadline = time.monotonic() + 10
        while state.read_engine(d).get("phase") != "ready":
            assert time.monotonic() < deadline, state.read_engine(d)
            time.sleep(0.05)
        eng = state.read_engine(d)
        assert eng["pid"] == second.proc.pid and eng["role"] == "head"
        assert eng["hbm_used_mb"] == int(0.9 * 65536)
    finally:
        second.stop()
    assert second.proc.returncode == 0
    assert state.read_engine(d) == {"phase": "stopped"}


def test_it_reports_roce_link_mode_from_hccl_env(tmp_path: Path) -> None:
    d = state.node_dir("ascend-02", tmp_path)
    port = free_port()
    env = {
        "SIM_STATE_DIR": str(tmp_path),
        "SIM_NODE": "ascend-02",
        "HCCL_INTRA_ROCE_ENABLE": "1",
        "HCCL_INTRA_PCIE_ENABLE": "0",
    }
    proc = SimProcess(serve_args(port), tmp_path / "roce.log", env)
    try:
        wait_health(port, 200, proc)
        deadline = time.monotonic() + 10
        while state.read_engine(d).get("link_mode") != "roce":
            assert time.monotonic() < deadline, state.read_engine(d)
            time.sleep(0.05)
    finally:
        proc.stop()


def test_it_serves_0_33_metrics_and_count_tokens(tmp_path: Path) -> None:
    port = free_port()
    proc = SimProcess(
        serve_args(port), tmp_path / "v33.log", {"SIM_VLLM_VERSION": "0.33.0"}
    )
    try:
        wait_health(port, 200, proc)
        assert httpx.get(f"http://127.0.0.1:{port}/version").json() == {
            "version": "0.33.0"
        }
        assert "vllm:request_num_preemptions" in metric_families(port)
        r = httpx.post(
            f"http://127.0.0.1:{port}/v1/messages/count_tokens",
            json={
                "model": MODEL,
                "messages": [{"role": "user", "content": "three small words"}],
            },
        )
        assert r.status_code == 200 and r.json()["input_tokens"] > 3
    finally:
        proc.stop()


def _content_events(port: int, path: str, body: dict[str, object]) -> list[str]:
    """The text of each streamed content event of one request."""
    texts = []
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", f"http://127.0.0.1:{port}{path}", json=body) as resp:
            assert resp.status_code == 200
            for line in resp.iter_lines():
                if not line.startswith("data: {"):
                    continue
                choices = json.loads(line[6:])["choices"]
                if not choices:
                    continue  # the usage chunk
                c = choices[0]
                text = c["delta"].get("content") if "delta" in c else c["text"]
                if text:
                    texts.append(text)
    return texts


def test_stream_interval_groups_tokens_like_vllm(tmp_path: Path) -> None:
    """--stream-interval 4: the first token alone, then 4 at a time, the rest at the
    end (10 tokens -> 1 + 4 + 4 + 1 events); the text is the same as one per token."""
    port = free_port()
    proc = SimProcess(
        serve_args(port, "--stream-interval", "4"), tmp_path / "interval.log"
    )
    try:
        wait_health(port, 200, proc)
        for path, body in (
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
            ("/v1/completions", {"prompt": "hi"}),
        ):
            req = {"model": MODEL, "max_tokens": 10, "ignore_eos": True, **body}
            events = _content_events(port, path, {**req, "stream": True})
            plain = httpx.post(f"http://127.0.0.1:{port}{path}", json=req).json()
            choice = plain["choices"][0]
            whole = (
                choice["message"]["content"] if "message" in choice else choice["text"]
            )
            assert "".join(events) == whole
            assert plain["usage"]["completion_tokens"] == 10
            assert len(events) == 4, events
    finally:
        proc.stop()


def test_stream_interval_one_is_an_event_per_token(
    server: tuple[int, SimProcess],
) -> None:
    port, _ = server
    events = _content_events(
        port,
        "/v1/completions",
        {
            "model": MODEL,
            "prompt": "hi",
            "max_tokens": 7,
            "ignore_eos": True,
            "stream": True,
        },
    )
    assert len(events) == 7


def test_it_refuses_a_stream_interval_below_one() -> None:
    res = run_cli("serve", "/m", "--stream-interval", "0")
    assert res.returncode == 2 and "--stream-interval" in res.stderr

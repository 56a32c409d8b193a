"""The container driver against the simulator's docker/podman CLI (real grammar, sim engine)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.drivers import get_driver
from engine.drivers.base import DriverError, EngineSpec
from engine.drivers.container import ContainerDriver, run_argv
from engine.sim import docker_cli

REPO = Path(__file__).resolve().parents[2]
SIM_BIN = REPO / "engine" / "sim" / "bin"
IMAGE = "quay.io/ascend/vllm-ascend:v0.23.0"
MODEL = "/data/models/Qwen3.5-397B-A17B"


def _spec(
    rank: int = 1, devices: str = "0,1", port: int = 0, workdir: str = ""
) -> EngineSpec:
    return EngineSpec(
        node="ascend-02",
        rank=rank,
        role="worker",
        argv=[
            "vllm",
            "serve",
            MODEL,
            "--port",
            str(port or 18000 + os.getpid() % 1000),
            "--served-model-name",
            "qwen3.5",
        ],
        env={
            "ASCEND_RT_VISIBLE_DEVICES": devices,
            "HCCL_IF_IP": "10.0.0.2",
            "VLLM_ASCEND_IMAGE": IMAGE,
            "VLLM_ASCEND_CLUSTER": "qwen35-prod",
        },
        workdir=workdir,
    )


@pytest.fixture
def sim_node(tmp_path, monkeypatch):
    monkeypatch.setenv("SIM_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("SIM_NODE", "ascend-02")
    monkeypatch.setenv("SIM_PYTHON", sys.executable)
    monkeypatch.setenv("PATH", f"{SIM_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CONTAINER_IMAGE", raising=False)
    return tmp_path


def test_it_renders_the_documented_run_argv():
    argv = run_argv(_spec(devices="0,1,2,3,4,5,6,7"))
    text = " ".join(argv)
    assert argv[:3] == ["docker", "run", "--detach"]
    for part in (
        "--name vllm-qwen35-prod-r1",
        "--label ascend.cluster=qwen35-prod --label ascend.node=ascend-02 --label ascend.rank=1",
        "--network=host --shm-size=1g",
        "--device /dev/davinci7 --device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc",
        "--volume /usr/local/dcmi:/usr/local/dcmi:ro",
        "--volume /usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro",
        "--volume /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/:ro",
        "--volume /etc/hccn.conf:/etc/hccn.conf:ro",
        f"--volume {MODEL}:{MODEL}:ro",
        "--env HCCL_IF_IP=10.0.0.2",
        f"{IMAGE} vllm serve {MODEL}",
    ):
        assert part in text, part
    assert "VLLM_ASCEND_IMAGE" not in text and "/dev/davinci8" not in text
    assert run_argv(_spec(), engine="podman")[0] == "podman"
    fg = run_argv(_spec(), detach=False)
    assert fg[2] == "--rm" and "--detach" not in fg


def test_every_rendered_option_is_real_docker_grammar():
    argv = run_argv(_spec())
    opts, image, command = docker_cli.parse_run(argv[2:])
    assert image == IMAGE and command[:2] == ["vllm", "serve"]
    assert opts["device"][-1] == "/dev/hisi_hdc" and opts["network"] == ["host"]


def test_the_sim_cli_refuses_what_docker_refuses():
    with pytest.raises(docker_cli.CliError, match="unknown flag: --gpu"):
        docker_cli.parse_run(["--gpu", "all", IMAGE])
    with pytest.raises(
        docker_cli.CliError, match="--privileged is docker grammar but not simulated"
    ):
        docker_cli.parse_run(["--privileged", IMAGE])
    with pytest.raises(docker_cli.CliError, match="requires at least 1 argument"):
        docker_cli.parse_run(["--detach"])
    assert docker_cli.run_grammar()["-v"] == ("volume", True)
    assert docker_cli.run_grammar()["--rm"] == ("rm", False)


def test_the_registry_knows_the_container_driver():
    assert isinstance(get_driver("container"), ContainerDriver)


def test_start_status_preflight_logs_stop(sim_node):
    d = ContainerDriver()
    spec = _spec()
    assert d.status(spec).state == "stopped"
    status = d.start(spec)
    assert status.state == "running" and status.pid
    with pytest.raises(DriverError, match="already running"):
        d.start(spec)
    other = _spec(rank=2, devices="1,2")
    checks = {c["name"]: c for c in d.preflight(other, "0.23.0")}
    assert checks["container engine"]["status"] == "pass"
    assert checks["container image"]["status"] == "pass"
    assert checks["npu devices free"]["status"] == "fail"
    assert (
        "vllm-qwen35-prod-r1 holds /dev/davinci1"
        in checks["npu devices free"]["evidence"]
    )
    deadline = time.monotonic() + 20
    while (
        not any("Uvicorn running" in line for line in d.logs(spec))
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert any("Uvicorn running" in line for line in d.logs(spec))
    stopped = d.stop(spec, grace_s=10)
    assert stopped.state == "exited" and stopped.exit_code == 0  # drained on TERM
    assert d.start(spec).state == "running"  # the exited container is replaced
    d.stop(spec, grace_s=10)


def test_the_agents_bare_spec_finds_the_container_started(sim_node):
    d = ContainerDriver()
    work = str(sim_node / "agent")
    d.start(_spec(workdir=work))
    bare = EngineSpec(
        "ascend-02", 0, "head", [], {}, work
    )  # as engine.stop/status send it
    assert d.status(bare).state == "running"
    assert d.stop(bare, grace_s=10).exit_code == 0


def test_preflight_fails_an_image_of_another_version(sim_node):
    checks = {c["name"]: c for c in ContainerDriver().preflight(_spec(), "0.22.1rc1")}
    assert checks["container image"]["status"] == "fail"
    assert "version=0.23.0, expected 0.22.1rc1" in checks["container image"]["evidence"]
    spec = _spec()
    spec.env["VLLM_ASCEND_IMAGE"] = "quay.io/ascend/vllm-ascend:v0.22.1rc1"
    checks = {c["name"]: c for c in ContainerDriver().preflight(spec, "0.22.1rc1")}
    assert "No such image" in checks["container image"]["evidence"]


def test_an_unknown_image_fails_start_with_dockers_message(sim_node):
    spec = _spec()
    spec.env["VLLM_ASCEND_IMAGE"] = "quay.io/ascend/vllm-ascend:v0.9.9"
    with pytest.raises(DriverError, match="Unable to find image") as exc:
        ContainerDriver().start(spec)
    assert exc.value.permanent


def test_podman_answers_the_same_grammar(sim_node):
    out = subprocess.run(
        ["podman", "version", "--format", "{{.Server.Version}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == docker_cli.SERVER_VERSION


@pytest.mark.parametrize(
    ("argv", "code", "stderr"),
    [
        (["stop", "--time"], 125, "docker: flag needs an argument: --time"),
        (
            ["stop", "-t", "soon", "x"],
            125,
            'docker: invalid argument "soon" for "-t" flag',
        ),
        (["inspect", "x", "--format"], 125, "docker: flag needs an argument: --format"),
        (["logs", "x", "--tail"], 125, "docker: flag needs an argument: --tail"),
        (["logs"], 1, 'docker: "docker logs" requires exactly 1 argument.'),
        (["logs", "gone"], 1, "Error response from daemon: No such container: gone"),
        (["bogus"], 1, "docker: 'bogus' is not a docker command (in the simulator)."),
    ],
)
def test_the_sim_cli_answers_bad_arguments_in_words_not_a_traceback(
    sim_node, argv, code, stderr
):
    out = subprocess.run(["docker", *argv], capture_output=True, text=True)
    assert (out.returncode, out.stderr.strip()) == (code, stderr)


def test_the_sim_cli_has_help_and_run_help_is_the_real_dockers(sim_node):
    out = subprocess.run(["podman", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "Usage:  podman [OPTIONS] COMMAND" in out.stdout
    assert all(f"\n  {cmd} " in out.stdout for cmd in ("run", "logs", "version"))
    out = subprocess.run(["docker", "run", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.startswith(
        "Usage:  docker run [OPTIONS] IMAGE [COMMAND] [ARG...]"
    )
    # the options the sim parses are the ones this text lists
    assert all(
        f"--{long_} " in out.stdout for long_, _ in docker_cli.run_grammar().values()
    )


def test_the_sim_cli_checks_a_log_tail_and_podman_names_itself_once(sim_node):
    subprocess.run(
        ["docker", "run", "--detach", "--name", "r0", IMAGE, "vllm", "serve", "m"],
        capture_output=True,
        check=True,
    )
    try:
        out = subprocess.run(
            ["docker", "logs", "--tail", "x", "r0"], capture_output=True, text=True
        )
        assert (out.returncode, out.stderr.strip()) == (
            125,
            'docker: invalid argument "x" for "--tail" flag',
        )
    finally:
        subprocess.run(["docker", "rm", "--force", "r0"], capture_output=True)
    out = subprocess.run(["podman", "bogus"], capture_output=True, text=True)
    assert (
        out.stderr.strip()
        == "podman: 'bogus' is not a podman command (in the simulator)."
    )


def test_node_preflight_checks_the_image_of_the_target_release(sim_node):
    from engine.drivers.container import node_preflight

    checks = {c["name"]: c for c in node_preflight("ascend-02", 8, "0.23.0", "a3")}
    assert checks["container image"]["status"] == "pass"
    assert "vllm-ascend:v0.23.0-a3" in checks["container image"]["evidence"]
    assert checks["npu devices free"]["status"] == "pass"
    checks = {c["name"]: c for c in node_preflight("ascend-02", 8, "0.22.1rc1", "a2")}
    assert checks["container image"]["status"] == "fail"
    assert "v0.22.1rc1: Error: No such image" in checks["container image"]["evidence"]


def test_a_sim_node_runs_a_container_rank_through_the_sim_cli(tmp_path, monkeypatch):
    """The demo's switch: a plan naming an image runs via docker on a sim node."""
    monkeypatch.setenv("SIM_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("SIM_NODE", raising=False)
    d = get_driver("sim")
    work = str(tmp_path / "ascend-02" / "agent")
    status = d.start(_spec(workdir=work))
    assert (
        status.state == "running" and "container vllm-qwen35-prod-r1" in status.detail
    )
    assert list((tmp_path / "ascend-02" / "containers").glob("*.json"))
    bare = EngineSpec("ascend-02", 0, "head", [], {}, work)
    assert d.status(bare).state == "running"
    assert d.stop(bare, grace_s=10).state == "exited"

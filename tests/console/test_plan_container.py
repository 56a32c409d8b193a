"""`manage.py plan` for a container-driver node prints the docker run argv of vllm-ascend's docs."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

from django.core.management import call_command

from console.models import Node


def _plan(*args: str) -> str:
    out = StringIO()
    call_command("plan", "qwen35-prod", *args, stdout=out)
    return out.getvalue()


def test_it_prints_the_docker_run_argv_for_a_container_node(cluster: Any) -> None:
    Node.objects.filter(name="ascend-02").update(driver=Node.Driver.CONTAINER)
    text = _plan("--node", "ascend-02")
    assert "  docker run --rm \\\n    --name vllm-qwen35-prod-r1 \\\n" in text
    assert "--device /dev/davinci7 \\\n    --device /dev/davinci_manager" in text
    assert "--volume /etc/hccn.conf:/etc/hccn.conf:ro \\\n" in text
    assert "\\\n    quay.io/ascend/vllm-ascend:v0.23.0 vllm serve /data/models/" in text
    data = json.loads(_plan("--node", "ascend-02", "--json"))
    (node,) = data["nodes"]
    argv = node["container_argv"]
    assert argv[argv.index("quay.io/ascend/vllm-ascend:v0.23.0") + 1 :] == node["argv"]
    assert "ExecStart=/usr/bin/docker run --rm" in node["systemd_unit"]
    assert (
        "ExecStop=/usr/bin/docker stop --time 120 vllm-qwen35-prod-r1"
        in node["systemd_unit"]
    )
    # the other ranks keep their systemd unit and bare argv
    other = json.loads(_plan("--node", "ascend-01", "--json"))["nodes"][0]
    assert "container_argv" not in other and "VLLM_ASCEND_IMAGE" not in other["env"]


def test_an_a3_server_gets_the_a3_image(cluster: Any) -> None:
    Node.objects.filter(name="ascend-02").update(
        driver=Node.Driver.CONTAINER, server_model_override="atlas-800t-a3"
    )
    data = json.loads(_plan("--node", "ascend-02", "--json"))
    assert "quay.io/ascend/vllm-ascend:v0.23.0-a3" in data["nodes"][0]["container_argv"]


def test_the_demo_can_plan_its_sim_nodes_as_containers(
    cluster: Any, settings: Any
) -> None:
    assert "container_argv" not in json.loads(_plan("--json"))["nodes"][0]
    settings.SIM_CONTAINERS = True
    nodes = json.loads(_plan("--json"))["nodes"]
    assert [n["rank"] for n in nodes] == [0, 1, 2, 3]  # start in rank order
    assert all(n["container_argv"][:3] == ["docker", "run", "--rm"] for n in nodes)

"""Inventory validation gives field-keyed errors that say the fix; the demo seed is idempotent."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from console.models import AuditEvent, Cluster, EngineProfile, Node, NodeRole
from console.services.inventory import demo_seed
from tests.factories import make_cluster, make_profile


def errors_of(obj: object) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as info:
        obj.full_clean()  # type: ignore[attr-defined]
    return info.value.message_dict


@pytest.mark.django_db
def test_it_seeds_the_demo_once() -> None:
    first = demo_seed()
    assert first == {"profiles": 2, "clusters": 2, "nodes": 7}
    second = demo_seed()
    assert second == {"profiles": 0, "clusters": 0, "nodes": 0}
    assert AuditEvent.objects.filter(action="inventory.seed_demo").count() == 1
    prod = Cluster.objects.get(name="qwen35-prod")
    assert [(n.name, n.rank, n.role) for n in prod.ranked_nodes()] == [
        ("ascend-01", 0, "head"),
        ("ascend-02", 1, "worker"),
        ("ascend-03", 2, "worker"),
        ("ascend-04", 3, "worker"),
    ]
    assert prod.profile.data_parallel_size * prod.profile.tensor_parallel_size == 32
    assert prod.profile.vllm_version == "0.23.0" and prod.state == "stopped"
    standby = Cluster.objects.get(name="qwen35-standby")
    assert [n.name for n in standby.ranked_nodes()] == ["ascend-05", "ascend-06"]
    assert (
        standby.profile.quantization == "ascend"
        and standby.profile.data_parallel_size == 2
    )
    spare = Node.objects.get(name="ascend-07")
    assert (
        spare.cluster is None and spare.role == NodeRole.SPARE and spare.npu_count == 8
    )
    ports = list(Node.objects.values_list("api_port", flat=True))
    assert len(set(ports)) == len(ports) == 7


@pytest.mark.django_db
def test_it_keeps_operator_changes_on_reseed() -> None:
    demo_seed()
    Node.objects.filter(name="ascend-03").update(link_mode="roce")
    demo_seed()
    assert Node.objects.get(name="ascend-03").link_mode == "roce"


@pytest.mark.django_db
def test_it_rejects_a_duplicate_rank() -> None:
    cluster = make_cluster(nodes=2)
    node = Node(
        name="dup",
        hostname="dup",
        management_ip="127.0.2.9",
        cluster=cluster,
        rank=1,
        role=NodeRole.WORKER,
    )
    assert "Rank 1 is already taken by test-cluster-n1" in errors_of(node)["rank"][0]


@pytest.mark.django_db
def test_it_rejects_a_second_head() -> None:
    cluster = make_cluster(nodes=2)
    node = Node(
        name="head2",
        hostname="h",
        management_ip="127.0.2.9",
        cluster=cluster,
        rank=0,
        role=NodeRole.HEAD,
    )
    errors = errors_of(node)
    assert "already the head of this cluster" in errors["role"][0]


@pytest.mark.django_db
def test_it_requires_rank_zero_for_the_head_and_no_rank_for_spares() -> None:
    cluster = make_cluster(nodes=1)
    head = Node(
        name="h9",
        hostname="h",
        management_ip="127.0.2.9",
        cluster=cluster,
        rank=5,
        role=NodeRole.HEAD,
    )
    assert "The head runs rank 0" in errors_of(head)["rank"][0]
    spare = Node(
        name="s9",
        hostname="s",
        management_ip="127.0.2.8",
        cluster=cluster,
        rank=3,
        role=NodeRole.SPARE,
    )
    errors = errors_of(spare)
    assert "A spare belongs to no cluster" in errors["cluster"][0]
    assert "A spare has no rank" in errors["rank"][0]


@pytest.mark.django_db
def test_it_rejects_nonpositive_npu_count_and_bad_ips() -> None:
    node = Node(
        name="bad",
        hostname="b",
        management_ip="127.0.2.9",
        role=NodeRole.SPARE,
        npu_count=0,
        npu_ips=["1.2.3.4", "nope"],
    )
    errors = errors_of(node)
    assert "npu_count" in errors
    assert "nope are not IP addresses" in errors["npu_ips"][0]


@pytest.mark.django_db
def test_it_rejects_same_api_and_rpc_port() -> None:
    node = Node(
        name="p",
        hostname="p",
        management_ip="127.0.2.9",
        role=NodeRole.SPARE,
        api_port=9000,
        rpc_port=9000,
    )
    assert "must differ from the API port (9000)" in errors_of(node)["rpc_port"][0]


@pytest.mark.django_db
def test_it_rejects_profile_pinning_link_env_and_bad_flags() -> None:
    profile = make_profile(
        extra_env={"HCCL_INTRA_ROCE_ENABLE": "1"}, extra_flags="--foo"
    )
    errors = errors_of(profile)
    assert "follow each node's link mode" in errors["extra_env"][0]
    assert "JSON list of strings" in errors["extra_flags"][0]


@pytest.mark.django_db
def test_it_rejects_pp_in_dp_mode_and_low_bits_without_quantization() -> None:
    profile = make_profile(
        pipeline_parallel_size=2, weight_bits=8, gpu_memory_utilization=1.5
    )
    errors = errors_of(profile)
    assert "PP must be 1 in the DP recipe" in errors["pipeline_parallel_size"][0]
    assert "need quantization 'ascend'" in errors["weight_bits"][0]
    assert "gpu_memory_utilization" in errors


@pytest.mark.django_db
def test_it_enforces_one_head_in_the_database() -> None:
    from django.db import IntegrityError, transaction

    cluster = make_cluster(nodes=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Node.objects.create(
            name="x",
            hostname="x",
            management_ip="127.0.2.9",
            cluster=cluster,
            rank=1,
            role=NodeRole.HEAD,
        )


@pytest.mark.django_db
def test_it_reports_membership_gaps() -> None:
    cluster = make_cluster(nodes=3)
    Node.objects.filter(cluster=cluster, rank=1).delete()
    assert "must be 0..1 without gaps" in cluster.membership_errors()[0]
    assert EngineProfile.objects.count() == 1


@pytest.mark.django_db
def test_it_refuses_a_profile_whose_hccl_and_vllm_timeouts_disagree() -> None:
    from console.services.inventory_admin import InventoryInvalid, profile_validate_plan

    profile = make_profile(
        extra_env={
            "HCCL_EXEC_TIMEOUT": "3600",
            "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "600",
        }
    )
    with pytest.raises(InventoryInvalid) as info:
        profile_validate_plan(profile=profile)
    [message] = info.value.errors["extra_env"]
    assert "not above HCCL_EXEC_TIMEOUT=3600" in message and "#13232" in message

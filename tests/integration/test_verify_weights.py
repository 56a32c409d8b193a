"""Issue 18: Verify weights — sha256 of every model file on every node, progress shown,
cached by size and mtime, a shard of the right size but other bytes named.

Real control worker, real node agents (sim driver: each node's own copy of a real
HF-format model directory), on a cluster that is serving: the operation only reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from console.models import ClusterState, OperationState
from console.services.operations import operation_start
from engine.sim.models import node_model_dir
from tests.agents import agents, control_worker
from tests.factories import make_cluster, make_user
from tests.integration.test_operations import CONTROL_ENV, FAST, watch_op

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SHARD = "model-00003-of-00004.safetensors"
BIG = "padding.bin"


def _run(cluster, user) -> tuple[object, list[str]]:
    """Start a verify_weights operation; return it finished and every summary seen."""
    return watch_op(
        operation_start(cluster=cluster, kind="verify_weights", user=user), 120
    )


def test_verify_weights_shows_progress_uses_its_cache_and_names_a_changed_shard(
    tmp_path: Path,
) -> None:
    cluster = make_cluster("wts", nodes=4, free_ports=True)
    cluster.state = ClusterState.RUNNING
    cluster.save(update_fields=["state"])
    nodes = cluster.ranked_nodes()
    path = cluster.profile.model_path
    # 3 MiB shards read at 2 MB/s: each node takes ~1.5 s, long enough to be watched
    for node in nodes:
        copy = node_model_dir(path, node.name, base=tmp_path)
        (copy / BIG).write_bytes(b"\x01" * (3 << 20))
    user = make_user("wanda", "operator")
    env = {**FAST, "SIM_STATE_DIR": str(tmp_path), "WEIGHTS_HASH_MB_S": "2"}
    with (
        agents(
            [n.name for n in nodes],
            extra_env=env,
            npu_ips={n.name: n.npu_ips for n in nodes},
        ),
        control_worker(CONTROL_ENV),
    ):
        first, seen = _run(cluster, user)
        assert first.state == OperationState.SUCCEEDED, first.error
        rows = {s.name: s for s in first.steps.all()}
        # live progress: bytes of the whole directory as they went by
        assert any(" of 3 MiB" in text and "file " in text for text in seen), seen
        row = rows[f"sha256 of the model files on {nodes[1].name}"]
        assert row.progress_done == row.progress_total > 0
        assert "0 from the cache" in row.summary, row.summary
        assert rows["Compare sha256 across nodes"].summary.endswith(
            "identical (sha256) on all 4 nodes"
        )

        # the second run answers from the cache: no file read again
        again, _ = _run(cluster, user)
        assert again.state == OperationState.SUCCEEDED, again.error
        row = {s.name: s for s in again.steps.all()}[
            f"sha256 of the model files on {nodes[1].name}"
        ]
        assert "0 MiB read" in row.summary and "0 from the cache" not in row.summary

        # same size, other bytes on rank 2: the size manifest cannot see it; sha256 can
        shard = node_model_dir(path, nodes[2].name, base=tmp_path) / SHARD
        data = bytearray(shard.read_bytes())
        data[-1] ^= 0xFF
        shard.write_bytes(bytes(data))
        bad, _ = _run(cluster, user)
    assert bad.state == OperationState.FAILED
    compare = {s.name: s for s in bad.steps.all()}["Compare sha256 across nodes"]
    assert compare.state == "failed"
    assert f"{nodes[2].name}: {SHARD}: sha256" in compare.summary, compare.summary
    assert "rsync -a --checksum" in compare.summary
    assert bad.result["weights"]["differ"].keys() == {nodes[2].name}
    cluster.refresh_from_db()
    assert cluster.state == ClusterState.RUNNING  # it only read

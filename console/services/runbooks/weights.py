"""Verify weights: sha256 of every model file on every node, compared across nodes.

A size-and-name manifest (what preflight compares before every start) cannot see a
shard of the right size with the wrong bytes — a copy cut short and padded, a bit
flipped on a disk. This operation reads every file on every node at once (each agent
bounded to ``WEIGHTS_HASH_MB_S`` and caching digests by size and mtime, engine/weights.py),
shows each node's bytes as they go by, and names the files whose sha256 differs from
the majority. It only reads: it runs on a serving cluster and leaves its state alone.
"""

from __future__ import annotations

import time
from typing import Any

from celery.result import AsyncResult
from django.conf import settings

from console.celery import app, node_queue
from console.models import Node
from console.models.operations import OperationStep, StepState
from console.opsmessages import message
from console.services.runbooks.base import Run
from console.services.weights import first_of
from engine import weights
from engine.checktext import text

MIB = 1024 * 1024


def weights_rows(run: Run) -> dict[str, Any]:
    return {
        "nodes": {
            node.name: run.add_step(f"sha256 of the model files on {node.name}", node)
            for node in run.nodes
        },
        "compare": run.add_step("Compare sha256 across nodes"),
    }


def _gib(n: int) -> str:
    return f"{n / (1024 * MIB):.1f} GiB" if n >= 1024 * MIB else f"{n / MIB:.0f} MiB"


def _show(run: Run, row: OperationStep, state: dict[str, Any]) -> None:
    done, total = int(state.get("done") or 0), int(state.get("total") or 0)
    run.step_update(
        row,
        progress_done=done // MIB,
        progress_total=max(1, total // MIB),
        summary=message(
            "summary.hash_progress",
            done=_gib(done),
            total=_gib(total),
            file_no=state.get("files_done", 0),
            files=state.get("files", 0),
            file=str(state.get("file", ""))[:300],
        ),
    )


def _send(node: Node, model_path: str, timeout: float) -> AsyncResult:
    return app.send_task(
        "node.weights_sha256",
        kwargs={"node": node.name, "model_path": model_path},
        queue=node.agent_queue or node_queue(node.name),
        expires=timeout,
    )


def _answer(result: AsyncResult) -> Any:
    try:
        return result.get(timeout=1, propagate=True, disable_sync_subtasks=False)
    except Exception as exc:  # the agent's own error is the step's evidence
        return exc
    finally:
        result.forget()


def run_weights(run: Run, rows: dict[str, Any]) -> None:
    """Every node hashes its model files at once (a row each, its bytes shown as they go
    by), then the digests are compared across nodes (the last row)."""
    timeout = float(settings.WEIGHTS_HASH_TIMEOUT_S)
    model_path = run.cluster.profile.model_path
    by_name = {node.name: node for node in run.nodes}
    for row in rows["nodes"].values():
        run.begin(row)
    pending = {
        name: _send(by_name[name], model_path, timeout) for name in rows["nodes"]
    }
    manifests: dict[str, dict[str, Any]] = {}
    failed: list[str] = []
    try:
        _await(run, rows["nodes"], pending, manifests, failed, model_path, timeout)
    finally:
        for result in pending.values():
            result.forget()  # an agent still hashing finishes on its own (bounded IO)
    _compare(run, rows["compare"], manifests, failed)


def _await(
    run: Run,
    rows: dict[str, OperationStep],
    pending: dict[str, AsyncResult],
    manifests: dict[str, dict[str, Any]],
    failed: list[str],
    model_path: str,
    timeout: float,
) -> None:
    """Poll the nodes until each answered or ``timeout`` passed, taking answers out of
    ``pending`` into ``manifests`` (hashed) or ``failed``."""
    deadline = time.monotonic() + timeout
    shown: dict[str, Any] = {}
    while pending:
        run.check_cancel()
        for name, result in list(pending.items()):
            row = rows[name]
            if not result.ready():
                info = result.info if result.state == "PROGRESS" else None
                if isinstance(info, dict) and info != shown.get(name):
                    shown[name] = info
                    _show(run, row, info)
                continue
            del pending[name]
            _take(run, row, name, _answer(result), manifests, failed, model_path)
        if pending and time.monotonic() > deadline:
            for name in pending:
                failed.append(name)
                run.fail(
                    rows[name],
                    message(
                        "summary.no_answer_within",
                        seconds=f"{timeout:.0f}",
                        setting="WEIGHTS_HASH_TIMEOUT_S",
                    ),
                )
            break
        time.sleep(0.25)


def _is_manifest(answer: Any) -> bool:
    """The shape of node.weights_sha256's answer: ``exists``, and when it does, ``files``
    (name to size), ``sha256`` (name to digest) and ``progress`` (byte counts)."""
    if not isinstance(answer, dict):
        return False
    if not answer.get("exists"):
        return True
    files, digests = answer.get("files"), answer.get("sha256")
    progress = answer.get("progress") or {}
    return (
        isinstance(files, dict)
        and all(isinstance(k, str) and isinstance(v, int) for k, v in files.items())
        and isinstance(digests, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in digests.items())
        and isinstance(progress, dict)
        and all(
            isinstance(progress.get(k, 0), int)
            for k in ("total", "cached", "bytes_read")
        )
    )


def _take(
    run: Run,
    row: OperationStep,
    name: str,
    answer: Any,
    manifests: dict[str, dict[str, Any]],
    failed: list[str],
    model_path: str,
) -> None:
    """One node's answer: its row fails (the agent's error, no model directory) or
    finishes with the node's digests."""
    if not isinstance(answer, Exception) and not _is_manifest(answer):
        # Results come back over the broker's result store: a shape the agent never
        # sends fails this node's row, not the whole operation with a KeyError.
        answer = ValueError(f"not a hash manifest: {str(answer)[:200]!r}")
    if isinstance(answer, Exception):
        failed.append(name)
        run.fail(row, message("summary.agent_error", error=str(answer)))
    elif not answer.get("exists"):
        failed.append(name)
        run.fail(
            row,
            message("summary.no_model_dir", path=model_path, node=name),
        )
    else:
        manifests[name] = answer
        progress = answer.get("progress") or {}
        run.finish(
            row,
            message(
                "summary.hashed",
                files=len(answer["sha256"]),
                size=_gib(int(progress.get("total") or 0)),
                cached=progress.get("cached", 0),
                read=_gib(int(progress.get("bytes_read") or 0)),
            ),
            progress_done=max(1, int(progress.get("total") or 0) // MIB),
            progress_total=max(1, int(progress.get("total") or 0) // MIB),
            data={"sha256": answer["sha256"], "progress": progress},
        )


def _compare(
    run: Run,
    row: OperationStep,
    manifests: dict[str, dict[str, Any]],
    failed: list[str],
) -> None:
    run.begin(row)
    items = weights.compare_items(manifests)
    differ = {node: [text(i) for i in its] for node, its in items.items()}
    run.result["weights"] = {
        "differ": differ,
        "nodes": sorted(manifests),
        "failed": sorted(failed),
    }
    if differ:
        lines = [
            message("summary.on_node", node=node, detail=i)
            for node, its in items.items()
            for i in its
        ]
        raise run.fail(
            row,
            message("summary.files_differ", diffs=first_of(lines)),
            data={"differ": differ},
        )
    if failed:
        raise run.fail(
            row, message("summary.not_every_node", nodes=", ".join(sorted(failed)))
        )
    files = len(next(iter(manifests.values()))["sha256"]) if manifests else 0
    run.finish(
        row,
        message("summary.weights_identical", files=files, count=len(manifests)),
        state=StepState.SUCCEEDED,
    )

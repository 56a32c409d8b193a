"""The first requests a started cluster answers: one smoke-test completion, then the warm-up."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
from django.conf import settings

from console.engine_auth import engine_headers
from console.models.operations import OperationStep, StepState
from console.opsmessages import message
from console.services.runbooks.base import Run


def smoke_test(run: Run, step: OperationStep) -> None:
    run.begin(step)
    body = {
        "model": run.cluster.profile.served_model_name,
        "prompt": "Say hello to the Ascend ops team.",
        "max_tokens": 16,
        "temperature": 0,
    }
    try:
        response = httpx.post(
            f"{run.head_url()}/v1/completions",
            json=body,
            headers=engine_headers(run.cluster.name),
            timeout=settings.SMOKE_TIMEOUT_S,
        )
        response.raise_for_status()
        text = response.json()["choices"][0]["text"]
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        raise run.fail(
            step, message("summary.completion_failed", error=str(exc))
        ) from None
    if not text.strip():
        raise run.fail(step, message("summary.completion_empty"))
    run.finish(
        step, message("summary.smoke_words", count=len(text.split()), text=text[:120])
    )


def warm_up(run: Run, step: OperationStep) -> None:
    total = int(run.op.params.get("warmup_requests", settings.WARMUP_REQUESTS))
    run.begin(step)
    run.step_update(step, progress_total=total)
    if total == 0:
        run.finish(step, message("summary.warmup_skipped"), state=StepState.SKIPPED)
        return
    done = errors = 0
    lock = threading.Lock()
    url = f"{run.head_url()}/v1/chat/completions"
    headers = engine_headers(run.cluster.name)
    model = run.cluster.profile.served_model_name

    def one(i: int) -> bool:
        body = {
            "model": model,
            "messages": [
                {
                    "role": "user",
                    "content": f"Warm-up request {i}: summarise HCCS vs RoCE.",
                }
            ],
            "max_tokens": 32,
        }
        try:
            with httpx.Client(
                timeout=settings.SMOKE_TIMEOUT_S, headers=headers
            ) as client:
                return client.post(url, json=body).status_code == 200
        except httpx.HTTPError:
            return False

    publish_every = max(1, total // 20)
    with ThreadPoolExecutor(max_workers=settings.WARMUP_CONCURRENCY) as pool:
        for ok in pool.map(one, range(total)):
            with lock:
                done += 1
                errors += 0 if ok else 1
            if done % publish_every == 0 or done == total:
                run.step_update(
                    step,
                    progress_done=done,
                    summary=message(
                        "summary.warmup_progress",
                        done=done,
                        total=total,
                        errors=errors,
                    ),
                )
    if errors > total * settings.WARMUP_MAX_ERROR_FRACTION:
        raise run.fail(
            step, message("summary.warmup_failed", errors=errors, total=total)
        )
    run.finish(
        step,
        message("summary.warmup_done", total=total, errors=errors),
        progress_done=total,
    )
